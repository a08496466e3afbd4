"""SS-DB, the science benchmark (papers/ssdb-benchmark.txt): raw images cooked
into observations (F1), observations grouped over time (F2), and the nine
queries, over TesseraDB's arrays, record streams and tables.

``cook`` runs F1 on any 2-D array of pixel values; a :class:`Run` holds a
benchmark run inside a database (``Run.create``, or ``db.ssdb(name)`` to
reopen one); ``q1`` .. ``q9`` are the queries. docs/ssdb.md explains each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tesseradb._lazy import exports

if TYPE_CHECKING:
    from tesseradb.ssdb._cook import OBSERVATION_COLUMNS, cook
    from tesseradb.ssdb._generate import ATTRS, Placement, image_pixels, placement, raw_image
    from tesseradb.ssdb._methods import SSDBMethods
    from tesseradb.ssdb._params import CONFIGS, PARAMS, WORLD_SIZE, Config, Params, config, params
    from tesseradb.ssdb._queries import (
        OBS_ATTRS,
        QueryPoint,
        q1,
        q2,
        q3,
        q4,
        q5,
        q6,
        q7,
        q8,
        q9,
        query_points,
    )
    from tesseradb.ssdb._run import OBS_PER_IMAGE, LoadTimes, Run, new_grouper

__all__ = [
    "ATTRS",
    "CONFIGS",
    "OBSERVATION_COLUMNS",
    "OBS_ATTRS",
    "OBS_PER_IMAGE",
    "PARAMS",
    "WORLD_SIZE",
    "Config",
    "LoadTimes",
    "Params",
    "Placement",
    "QueryPoint",
    "Run",
    "SSDBMethods",
    "config",
    "cook",
    "image_pixels",
    "new_grouper",
    "params",
    "placement",
    "q1",
    "q2",
    "q3",
    "q4",
    "q5",
    "q6",
    "q7",
    "q8",
    "q9",
    "query_points",
    "raw_image",
]

# each name imported from its module when first used (tesseradb._lazy)
__getattr__, __dir__ = exports(
    __name__,
    {
        "OBSERVATION_COLUMNS": "tesseradb.ssdb._cook",
        "cook": "tesseradb.ssdb._cook",
        "ATTRS": "tesseradb.ssdb._generate",
        "Placement": "tesseradb.ssdb._generate",
        "image_pixels": "tesseradb.ssdb._generate",
        "placement": "tesseradb.ssdb._generate",
        "raw_image": "tesseradb.ssdb._generate",
        "CONFIGS": "tesseradb.ssdb._params",
        "PARAMS": "tesseradb.ssdb._params",
        "WORLD_SIZE": "tesseradb.ssdb._params",
        "Config": "tesseradb.ssdb._params",
        "Params": "tesseradb.ssdb._params",
        "config": "tesseradb.ssdb._params",
        "params": "tesseradb.ssdb._params",
        "OBS_ATTRS": "tesseradb.ssdb._queries",
        "QueryPoint": "tesseradb.ssdb._queries",
        "q1": "tesseradb.ssdb._queries",
        "q2": "tesseradb.ssdb._queries",
        "q3": "tesseradb.ssdb._queries",
        "q4": "tesseradb.ssdb._queries",
        "q5": "tesseradb.ssdb._queries",
        "q6": "tesseradb.ssdb._queries",
        "q7": "tesseradb.ssdb._queries",
        "q8": "tesseradb.ssdb._queries",
        "q9": "tesseradb.ssdb._queries",
        "query_points": "tesseradb.ssdb._queries",
        "OBS_PER_IMAGE": "tesseradb.ssdb._run",
        "LoadTimes": "tesseradb.ssdb._run",
        "Run": "tesseradb.ssdb._run",
        "new_grouper": "tesseradb.ssdb._run",
        "SSDBMethods": "tesseradb.ssdb._methods",
    },
)
