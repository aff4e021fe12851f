"""Aggregate and reduce functions the contract runs states with: order-revealing, (sum, count), aliasing-revealing."""

from __future__ import annotations

from statekit import AggregateFunction


class Concat(AggregateFunction):
    """Order-revealing aggregate: the accumulator is the list of inputs, the result a string."""

    def create_accumulator(self):
        return []

    def add(self, value, accumulator):
        return accumulator + [value]

    def merge(self, acc_a, acc_b):
        return acc_a + acc_b

    def get_result(self, accumulator):
        return "".join(accumulator)


class SumCount(AggregateFunction):
    """(sum, count) of int values."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value, accumulator[1] + 1)

    def merge(self, acc_a, acc_b):
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])

    def get_result(self, accumulator):
        return accumulator


class Average(SumCount):
    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]


class AppendInPlace(AggregateFunction):
    """An accumulator mutated in place and returned as the result: aliasing shows at once."""

    def create_accumulator(self):
        return []

    def add(self, value, accumulator):
        accumulator.append(value)
        return accumulator

    def merge(self, acc_a, acc_b):
        acc_a.extend(acc_b)
        return acc_a

    def get_result(self, accumulator):
        return accumulator


def concat_strings(a: str, b: str) -> str:
    return a + b
