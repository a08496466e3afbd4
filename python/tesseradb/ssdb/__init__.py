"""SS-DB, the science benchmark (papers/ssdb-benchmark.txt): raw images cooked
into observations (F1), observations grouped over time (F2), and the nine
queries, over TesseraDB's arrays, record streams and tables.

``cook`` runs F1 on any 2-D array of pixel values; a :class:`Run` holds a
benchmark run inside a database (``Run.create``, or ``db.ssdb(name)`` to
reopen one); ``q1`` .. ``q9`` are the queries. docs/ssdb.md explains each.
"""

from tesseradb.ssdb._cook import OBSERVATION_COLUMNS, cook
from tesseradb.ssdb._generate import ATTRS, Placement, image_pixels, placement, raw_image
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
