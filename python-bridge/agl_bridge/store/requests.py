"""The request pieces ``StoreClient`` builds from its arguments: enum values from names or numbers, pages, rollout
configs from their JSON form."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format

from agl_bridge.gen.agl.v1 import triplets_pb2, types_pb2
from agl_bridge.store.convert import enum_value

__all__ = [
    "AttemptStatusLike",
    "RolloutStatusLike",
    "attempt_status",
    "page",
    "rollout_config",
    "rollout_mode",
    "rollout_status",
    "triplet_options",
]

RolloutStatusLike = int | str
AttemptStatusLike = int | str


def rollout_status(value: RolloutStatusLike) -> types_pb2.RolloutStatus:
    return enum_value(types_pb2.RolloutStatus, "ROLLOUT_STATUS_", value)


def attempt_status(value: AttemptStatusLike) -> types_pb2.AttemptStatus:
    return enum_value(types_pb2.AttemptStatus, "ATTEMPT_STATUS_", value)


def rollout_mode(value: int | str | None) -> types_pb2.RolloutMode:
    return enum_value(types_pb2.RolloutMode, "ROLLOUT_MODE_", 0 if value is None else value)


def page(limit: int | None, offset: int, sort_by: str, sort_order: int | str) -> types_pb2.Page:
    page = types_pb2.Page(
        sort_by=sort_by,
        sort_order=enum_value(types_pb2.SortOrder, "SORT_ORDER_", sort_order),
        offset=offset,
    )
    if limit is not None:
        page.limit = limit
    return page


def rollout_config(config: types_pb2.RolloutConfig | Mapping[str, Any] | None) -> types_pb2.RolloutConfig | None:
    if config is None or isinstance(config, types_pb2.RolloutConfig):
        return config
    return json_format.ParseDict(dict(config), types_pb2.RolloutConfig())


def triplet_options(
    target: triplets_pb2.TripletOptions, options: triplets_pb2.TripletOptions | Mapping[str, Any] | None
) -> None:
    """Fills a request's ``options`` from a ``TripletOptions`` or its JSON form; None leaves the store's defaults."""
    if options is None:
        return
    if isinstance(options, triplets_pb2.TripletOptions):
        target.CopyFrom(options)
    else:
        json_format.ParseDict(dict(options), target)
