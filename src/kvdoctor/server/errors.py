"""The errors both server modules raise and catch: kept here so `app` and `slack` need not import
each other."""

from __future__ import annotations


class HttpError(Exception):
    """A one-line client error: `kvdoctor: <where>: <what>; <what to do>`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class DiagnoseTimeout(Exception):
    pass
