"""Deterministic data shaped like the papers' data sets, at any size: for the
quickstart, the benchmarks and the tests.

- record streams (MDDS): NYC taxi trips (:func:`taxi`, the paper's Listing 1,
  :data:`TAXI_DESCRIPTOR`) and GHCN-Daily observations (:func:`ghcn`,
  Listing 2, :data:`GHCN_DESCRIPTOR`);
- attached files (SDS/Q): a Palomar Transient Factory HDF5 file with the
  real schema (:func:`ptf_file`, :data:`PTF_SCHEMA`);
- arrays (SS-DB): raw sky images with 11 int32 attributes (:func:`sky_image`);
- the files the documentation's examples load (:func:`example_data`,
  ``tessera example-data DIR``).

Each is seeded: the same arguments give the same data.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = [
    "DOCS_TAXI_DESCRIPTOR",
    "GHCN_DESCRIPTOR",
    "IMAGE_ATTRS",
    "PTF_SCHEMA",
    "TAXI_DESCRIPTOR",
    "element_code",
    "example_data",
    "ghcn",
    "ptf_file",
    "sky_image",
    "taxi",
]


# --- record streams (MDDS) ----------------------------------------------------------------
# element, share of records, and how its values are drawn (in GHCN's units)
_ELEMENTS = [
    ("PRCP", 0.30),
    ("TMAX", 0.14),
    ("TMIN", 0.14),
    ("TAVG", 0.05),
    ("SNOW", 0.12),
    ("SNWD", 0.12),
    ("TOBS", 0.05),
    ("WT01", 0.02),
    ("WT03", 0.015),
    ("WT07", 0.01),
    ("WT08", 0.01),
    ("WT10", 0.005),
    ("WT16", 0.025),
]

# (lat, lon, elevation) of landmark stations the paper's queries look for
_LANDMARKS = [
    (63.95, -152.2815, 1950.0),  # near Mount McKinley (Q6)
    (36.4622, -116.8669, -59.1),  # Death Valley: hot, below sea level (Q8, Q9)
    (31.5590, 35.3900, -390.0),  # the Dead Sea shore (Q9)
    (29.6500, 91.1300, 4507.0),  # Lhasa region (Q2)
    (-16.5000, -68.1500, 4058.0),  # El Alto (Q2)
    (39.7392, -104.9903, 1609.0),  # Denver (Q3)
    (38.8339, -104.8214, 1839.0),  # Colorado Springs (Q3)
    (37.6872, -97.3301, 405.0),  # Wichita, Kansas (Q4)
    (51.5074, -0.1278, 11.0),  # London (Q5)
    (37.5665, 126.9780, 38.0),  # Seoul (Q7)
]


# Listing 1 (hack_license as the appendix's schema names it)
TAXI_DESCRIPTOR = """<description typeid="7c9e6679-7425-40de-944b-e07fc1f90ae7">
 <field name="medallion" type="char" array_len=33/>
 <field name="hack_license" type="char" array_len=33/>
 <field name="vendor_id" type="char" array_len=4/>
 <field name="rate_code" type="int64_t"/>
 <field name="store_and_fwd_flag" type="char" array_len=2/>
 <field name="pickup_datetime" type="epoch_t"/>
 <field name="dropoff_datetime" type="epoch_t"/>
 <field name="passenger_count" type="int64_t"/>
 <field name="trip_time_in_secs" type="int64_t"/>
 <field name="trip_distance" type="float"/>
 <field name="pickup_longitude" type="float"/>
 <field name="pickup_latitude" type="float"/>
 <field name="dropoff_longitude" type="float"/>
 <field name="dropoff_latitude" type="float"/>
 <field name="pickup_latitude"/>
 <field name="pickup_longitude"/>
 <field name="pickup_datetime"/>
 <field name="passenger_count"/>
 <field name="trip_time_in_secs"/>
"""


# Listing 2, with the field the queries call station_id, and element_value signed:
# temperatures below zero are negative tenths of a degree (the appendix's INTEGER)
GHCN_DESCRIPTOR = """<description typeid="0b7e3f0c-8a51-4a0e-b7c5-2f4c1d7e9a61">
 <field name="time" type="epoch_t"/>
 <field name="station_id" type="char" array_len=12/>
 <field name="longitude" type="float"/>
 <field name="latitude" type="float"/>
 <field name="elevation" type="float"/>
 <field name="element_id" type="uint32_t"/>
 <field name="element_value" type="int32_t"/>
 <field name="element_id"/>
 <field name="latitude"/>
 <field name="longitude"/>
 <field name="elevation"/>
 <field name="element_value"/>
 <field name="time"/>
"""


YEAR_2013 = (1_356_998_400, 1_388_534_400)  # 2013-01-01 .. 2014-01-01 UTC


def element_code(name: str) -> int:
    """A GHCN element code packed big-endian into a uint32: 'SNOW' -> 1397641047."""
    return int.from_bytes(name.encode("ascii"), "big")


def _hex_pool(rng: Any, size: int) -> Any:
    import pyarrow as pa

    raw = rng.integers(0, 256, (size, 16), dtype="uint8")
    return pa.array([bytes(r).hex().upper() for r in raw], pa.string())


def taxi(n: int, seed: int = 0) -> Any:
    """``n`` taxi trips shaped like 2013's NYC data (Listing 1), in pickup-time order."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    medallions = _hex_pool(rng, 13_500)
    licenses = _hex_pool(rng, 42_000)
    pickup = np.sort(rng.integers(*YEAR_2013, n))
    trip_time = np.minimum(np.round(rng.lognormal(6.5, 0.6, n)), 10_800).astype(np.int64)
    distance = np.round(np.minimum(rng.lognormal(0.7, 0.8, n), 100.0), 2).astype(np.float32)
    passengers = rng.choice(
        np.array([1, 2, 5, 3, 6, 4]), n, p=[0.71, 0.13, 0.06, 0.04, 0.04, 0.02]
    ).astype(np.int64)
    lat, lon = _nyc_points(rng, n)
    dlat, dlon = _nyc_points(rng, n)
    rate = np.where(rng.random(n) < 0.97, 1, rng.integers(2, 7, n)).astype(np.int64)
    flags = pa.array(["N", "Y", ""]).take(
        pa.array(rng.choice(3, n, p=[0.49, 0.01, 0.50]).astype(np.int32))
    )
    return pa.table(
        {
            "medallion": medallions.take(pa.array(rng.integers(0, len(medallions), n))),
            "hack_license": licenses.take(pa.array(rng.integers(0, len(licenses), n))),
            "vendor_id": pa.array(["CMT", "VTS"]).take(
                pa.array(rng.integers(0, 2, n).astype(np.int32))
            ),
            "rate_code": rate,
            "store_and_fwd_flag": flags,
            "pickup_datetime": pickup,
            "dropoff_datetime": pickup + trip_time,
            "passenger_count": passengers,
            "trip_time_in_secs": trip_time,
            "trip_distance": distance,
            "pickup_longitude": lon,
            "pickup_latitude": lat,
            "dropoff_longitude": dlon,
            "dropoff_latitude": dlat,
        }
    )


def _nyc_points(rng: Any, n: int) -> tuple[Any, Any]:
    """Coordinates concentrated on Manhattan, airports, a tail over NYC, ~1% zero or junk."""
    import numpy as np

    kind = rng.choice(5, n, p=[0.80, 0.06, 0.03, 0.10, 0.01])
    lat = np.empty(n)
    lon = np.empty(n)
    # Manhattan: along its axis (about 29 degrees east of north), narrow across it
    m = kind == 0
    along = rng.normal(0, 0.045, m.sum())
    across = rng.normal(0, 0.008, m.sum())
    angle = math.radians(29)
    lat[m] = 40.758 + along * math.cos(angle) - across * math.sin(angle)
    lon[m] = -73.982 + (along * math.sin(angle) + across * math.cos(angle)) / 0.76
    for k, (clat, clon) in ((1, (40.7740, -73.8726)), (2, (40.6446, -73.7823))):  # LGA, JFK
        s = kind == k
        lat[s] = rng.normal(clat, 0.004, s.sum())
        lon[s] = rng.normal(clon, 0.006, s.sum())
    t = kind == 3  # the rest of the city
    lat[t] = rng.uniform(40.55, 40.92, t.sum())
    lon[t] = rng.uniform(-74.10, -73.70, t.sum())
    j = kind == 4  # zero and junk coordinates, as in the real data
    junk = rng.random(j.sum())
    lat[j] = np.where(junk < 0.7, 0.0, rng.uniform(-90, 90, j.sum()))
    lon[j] = np.where(junk < 0.7, 0.0, rng.uniform(-180, 180, j.sum()))
    return lat.astype(np.float32), lon.astype(np.float32)


def _stations(rng: Any, count: int) -> tuple[Any, Any, Any]:
    """Station coordinates spread like land stations: dense in the US and Europe."""
    import numpy as np

    regions = [  # lat lo, lat hi, lon lo, lon hi, share
        (25, 49, -125, -67, 0.45),  # contiguous US
        (55, 71, -165, -140, 0.03),  # Alaska
        (36, 60, -10, 30, 0.15),  # Europe
        (20, 50, 70, 140, 0.12),  # Asia
        (-40, -12, 115, 153, 0.08),  # Australia
        (-35, 5, -75, -40, 0.07),  # South America
        (45, 60, -120, -60, 0.06),  # Canada
        (-30, 30, -15, 40, 0.04),  # Africa
    ]
    shares = np.array([r[4] for r in regions])
    which = rng.choice(len(regions), count, p=shares / shares.sum())
    lat = np.array([rng.uniform(regions[w][0], regions[w][1]) for w in which])
    lon = np.array([rng.uniform(regions[w][2], regions[w][3]) for w in which])
    elevation = np.round(rng.gamma(1.3, 380.0, count), 1)
    elevation[rng.random(count) < 0.01] = -999.9  # GHCN's missing elevation
    marks = np.array(_LANDMARKS)
    k = min(len(marks), count)
    lat[:k], lon[:k], elevation[:k] = marks[:k, 0], marks[:k, 1], marks[:k, 2]
    return lat, lon, elevation


def ghcn(n: int, seed: int = 0, stations: int = 3000) -> Any:
    """``n`` GHCN-Daily observations (Listing 2), sorted by time, from synthetic stations."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    slat, slon, selev = _stations(rng, stations)
    countries = rng.choice(list("ACEIRU"), stations)
    ids = pa.array([f"{c}{i:010d}" for i, c in enumerate(countries)])
    station = rng.integers(0, stations, n)
    landmark = rng.random(n) < 0.02  # the landmark stations report more than their share
    station[landmark] = rng.integers(0, min(len(_LANDMARKS), stations), int(landmark.sum()))
    names = [e for e, _ in _ELEMENTS]
    shares = np.array([s for _, s in _ELEMENTS])
    element = rng.choice(len(names), n, p=shares / shares.sum())
    lat = slat[station]
    elev = selev[station]
    # values in GHCN's units: tenths of a degree, tenths of mm, mm, flags of 1
    warm = 300 - np.abs(lat) * 6 - np.maximum(elev, 0) / 15
    value = np.ones(n)
    code = np.array(names)[element]
    value = np.where(code == "TMAX", rng.normal(warm + 60, 80), value)
    value = np.where(code == "TMIN", rng.normal(warm - 60, 80), value)
    value = np.where((code == "TAVG") | (code == "TOBS"), rng.normal(warm, 80), value)
    value = np.where(
        code == "PRCP", np.round(rng.exponential(40, n)) * (rng.random(n) < 0.4), value
    )
    value = np.where(
        code == "SNOW", np.round(rng.exponential(30, n)) * (rng.random(n) < 0.3), value
    )
    value = np.where(
        code == "SNWD", np.round(rng.exponential(120, n)) * (rng.random(n) < 0.4), value
    )
    hot = (code == "TMAX") & (station == 1)  # Death Valley's hottest days pass 54.4 C
    value = np.where(hot, rng.normal(480, 45, n), value)
    days = np.sort(rng.integers(0, 365 * 60, n))  # 1960 .. 2020, one record per observation
    time_ = (-315_619_200 + days * 86_400).astype(np.int64)
    return pa.table(
        {
            "time": time_,
            "station_id": ids.take(pa.array(station)),
            "longitude": slon[station].astype(np.float32),
            "latitude": lat.astype(np.float32),
            "elevation": elev.astype(np.float32),
            "element_id": np.array([element_code(e) for e in names], dtype=np.uint32)[element],
            "element_value": np.round(value).astype(np.int32),
        }
    )


# --- attached files (SDS/Q) ------------------------------------------------------------
# The real schema: generated from the sample listing (ptf_small.h5.ls): table -> [(column, numpy dtype)]
PTF_SCHEMA: dict[str, list[tuple[str, str]]] = {
    "subtraction": [
        ("id", "<i8"),
        ("deep_ref_id", "<i8"),
        ("ref_filename", "|S32"),
        ("proc_image_id", "<i8"),
        ("new_filename", "|S48"),
        ("sub_mid", "<i4"),
        ("ra_c", "<f8"),
        ("dec_c", "<f8"),
        ("ra_ll", "<f8"),
        ("dec_ll", "<f8"),
        ("ra_ul", "<f8"),
        ("dec_ul", "<f8"),
        ("ra_ur", "<f8"),
        ("dec_ur", "<f8"),
        ("ra_lr", "<f8"),
        ("dec_lr", "<f8"),
        ("height", "<f4"),
        ("width", "<f4"),
        ("image_footprint", "|S128"),
        ("good_pix_area", "<f4"),
        ("date", "|S32"),
        ("base_dir", "|S64"),
        ("data_dir", "|S32"),
        ("filename", "|S64"),
        ("ujd", "<f8"),
        ("ccdid", "<i4"),
        ("ptffield", "<i4"),
        ("filter", "|S4"),
        ("objs_extracted", "<i4"),
        ("objs_saved", "<i4"),
        ("lmt_mg_new", "<f4"),
        ("lmt_mg_ref", "<f4"),
        ("medsky_new", "<f4"),
        ("medsky_ref", "<f4"),
        ("seeing_new", "<f4"),
        ("seeing_ref", "<f4"),
        ("skysig_new", "<f4"),
        ("skysig_ref", "<f4"),
        ("ub1_zp_new", "<f4"),
        ("ub1_zp_ref", "<f4"),
        ("il", "<f4"),
        ("iu", "<f4"),
        ("r", "<f4"),
        ("nsx", "<f4"),
        ("nsy", "<f4"),
        ("rss", "<f4"),
        ("tl", "<f4"),
        ("tu", "<f4"),
        ("flag", "<i4"),
        ("scanned", "|i1"),
        ("sub_zp", "<f4"),
    ],
    "candidate": [
        ("id", "<i8"),
        ("sub_id", "<i8"),
        ("number", "<i4"),
        ("x_sub", "<f4"),
        ("y_sub", "<f4"),
        ("ra", "<f8"),
        ("dec", "<f8"),
        ("mag", "<f4"),
        ("mag_err", "<f4"),
        ("flux", "<f4"),
        ("flux_err", "<f4"),
        ("f_aper", "<f4"),
        ("f_aper_err", "<f4"),
        ("background", "<f4"),
        ("a_image", "<f4"),
        ("b_image", "<f4"),
        ("fwhm", "<f4"),
        ("flag", "<f4"),
        ("x_ref", "<f4"),
        ("y_ref", "<f4"),
        ("ra_ref", "<f8"),
        ("dec_ref", "<f8"),
        ("mag_ref", "<f4"),
        ("mag_ref_err", "<f4"),
        ("a_ref", "<f4"),
        ("b_ref", "<f4"),
        ("fwhm_ref", "<f4"),
        ("mag_aper", "<f4"),
        ("mag_aper_err", "<f4"),
        ("flux_aper", "<f4"),
        ("flux_aper_err", "<f4"),
        ("n2sig3", "<i4"),
        ("n3sig3", "<i4"),
        ("n2sig5", "<i4"),
        ("n3sig5", "<i4"),
        ("nmask", "<i4"),
        ("xint_ref", "<i4"),
        ("yint_ref", "<i4"),
        ("xint_new", "<i4"),
        ("yint_new", "<i4"),
        ("nn_dist", "<f8"),
        ("pos_sub", "|i1"),
        ("lu", "|i1"),
        ("lu_matches", "<i2"),
        ("pgc_num_nearest", "<i4"),
        ("candidate_mid", "<i4"),
        ("sym", "<f4"),
        ("maybe", "<f4"),
    ],
    "rb_classifier": [
        ("candidate_id", "<i8"),
        ("sub_id", "<i8"),
        ("bogus", "<f4"),
        ("suspect", "<f4"),
        ("unclear", "<f4"),
        ("maybe", "<f4"),
        ("realish", "<f4"),
        ("realbogus", "<f4"),
        ("rb_model_id", "<i4"),
    ],
}


CANDIDATES_PER_SUBTRACTION = 400


FIRST_NIGHT = 2454900.0  # JD, spring 2009


def ptf_file(path: Path, candidates: int, seed: int = 7) -> dict[str, Any]:
    """Write a PTF-shaped file with ``candidates`` candidate rows; return the query windows."""
    import h5py
    import numpy as np

    rng = np.random.default_rng(seed)
    subtractions = max(candidates // CANDIDATES_PER_SUBTRACTION, 10)
    # Nightly observing, one night in six lost to weather: ~333 observing nights,
    # so that a night holds ~0.3% of the subtractions, a week ~2% and an hour
    # ~0.03%, the paper's selectivities for Q2, Q3 and Q1.
    nights = 333
    calendar = np.arange(400)
    night_jds = np.sort(rng.choice(calendar, size=nights, replace=False)) + FIRST_NIGHT
    on_night = rng.integers(0, nights, subtractions)
    ujd = np.sort(
        night_jds[on_night] + 0.1 + rng.uniform(0, 0.42, subtractions)
    )  # ~10 hours a night
    sub_ids = np.arange(1, subtractions + 1, dtype=np.int64)
    per_sub = rng.multinomial(candidates, np.full(subtractions, 1 / subtractions))
    cand_sub = np.repeat(sub_ids, per_sub)
    cand_ids = np.arange(1, candidates + 1, dtype=np.int64)
    realbogus = rng.beta(0.3, 6.0, candidates).astype(np.float32)

    special: dict[str, dict[str, Any]] = {
        "subtraction": {
            "id": sub_ids,
            "ujd": ujd,
            "ccdid": rng.integers(0, 12, subtractions),
            "ptffield": rng.integers(1000, 6000, subtractions),
            "filter": rng.choice(np.array([b"R", b"g"], dtype="S4"), subtractions, p=[0.85, 0.15]),
            "ra_c": rng.uniform(0, 360, subtractions),
            "dec_c": rng.uniform(-30, 85, subtractions),
            "seeing_new": rng.gamma(9.0, 0.25, subtractions),
        },
        "candidate": {
            "id": cand_ids,
            "sub_id": cand_sub,
            "mag": np.clip(rng.normal(19.5, 1.3, candidates), 13.5, 22.0),
            "mag_err": rng.uniform(0.002, 0.22, candidates),
            "fwhm": np.clip(rng.lognormal(np.log(3.0), 0.5, candidates), 0.8, 15.0),
            "a_image": rng.lognormal(np.log(0.95), 0.4, candidates),
            "b_image": rng.lognormal(np.log(0.65), 0.35, candidates),
            "flux": rng.lognormal(np.log(1100.0), 1.2, candidates),
            "number": rng.integers(1, 3000, candidates),
        },
        "rb_classifier": {
            "candidate_id": cand_ids,
            "sub_id": cand_sub,
            "realbogus": realbogus,
            "bogus": 1.0 - realbogus,
            "rb_model_id": np.ones(candidates, dtype=np.int32),
        },
    }
    rows = {"subtraction": subtractions, "candidate": candidates, "rb_classifier": candidates}
    with h5py.File(path, "w") as f:
        for table, columns in PTF_SCHEMA.items():
            group = f.create_group(table)
            n = rows[table]
            for column, dtype in columns:
                values = special[table].get(column)
                if values is None:
                    values = _filler(rng, column, np.dtype(dtype), n)
                group.create_dataset(
                    column, data=np.asarray(values).astype(dtype), chunks=(8192,), maxshape=(None,)
                )
    middle = night_jds[nights // 2]
    return {
        "q1": [middle + 0.25, middle + 0.25 + 1 / 24],  # one hour
        "q2": [middle, middle + 1.0],  # one night
        "q3": [middle, middle + 7.0],  # one week
    }


def _filler(rng: Any, column: str, dtype: Any, n: int) -> Any:
    """Plausible values for the columns the workload does not look at."""
    import numpy as np

    if dtype.kind == "S":
        return np.full(n, f"{column}-{dtype.itemsize}".encode()[: dtype.itemsize], dtype=dtype)
    if dtype.kind in "iu":
        high = min(np.iinfo(dtype).max, 10_000)
        return rng.integers(0, high, n, dtype=dtype)
    return rng.normal(100.0, 30.0, n).astype(dtype)


# --- arrays (SS-DB) --------------------------------------------------------------------
IMAGE_ATTRS = [f"v{i}" for i in range(1, 12)]


def sky_image(n: int, seed: int) -> dict[str, Any]:
    """One n x n raw image: 11 int32 attributes, deterministic by ``seed``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sky = rng.normal(1000.0, 30.0, (n, n))
    stars = max(1, n * n // 5000)
    ys, xs = rng.integers(0, n, stars), rng.integers(0, n, stars)
    flux = rng.lognormal(8.0, 1.0, stars)
    yy, xx = np.mgrid[-3:4, -3:4]
    psf = np.exp(-(yy**2 + xx**2) / 2.0)
    for dy in range(7):
        for dx in range(7):
            y, x = np.clip(ys + dy - 3, 0, n - 1), np.clip(xs + dx - 3, 0, n - 1)
            np.add.at(sky, (y, x), flux * psf[dy, dx])
    v1 = sky.astype(np.int32)
    out = {"v1": v1}
    for i, name in enumerate(IMAGE_ATTRS[1:], start=2):
        if i % 3 == 0:  # a quality flag: mostly zero
            out[name] = (rng.random((n, n)) < 0.01).astype(np.int32) * i
        elif i % 3 == 1:  # a derived measurement: scaled signal plus noise
            out[name] = (v1 // i + rng.integers(0, 4, (n, n))).astype(np.int32)
        else:  # a second band: correlated with the first
            out[name] = (v1 * 0.8 + rng.normal(0, 10, (n, n))).astype(np.int32)
    return out


# --- the documentation's input files ------------------------------------------------------
# the short taxi descriptor docs/records.md prints (the paper's Listing 1, five fields)
DOCS_TAXI_DESCRIPTOR = """<description typeid="7c9e6679-7425-40de-944b-e07fc1f90ae7">
 <field name="medallion" type="char" array_len=33/>
 <field name="pickup_datetime" type="epoch_t"/>
 <field name="passenger_count" type="int64_t"/>
 <field name="pickup_latitude" type="double"/>
 <field name="pickup_longitude" type="double"/>
 <field name="pickup_latitude"/>
 <field name="pickup_datetime"/>
"""


def example_data(folder: str | Path) -> list[Path]:
    """Write the input files the README's and docs/' examples name, into ``folder``
    (``tessera example-data DIR``): FITS nights, NetCDF grids, a TIFF stack, an .npy
    volume, readings as Parquet and CSV, people as JSON lines and a JSON array, PTF
    nights as HDF5, the taxi descriptor and a month of trips. Returns what it wrote.
    Seeded: the same files every time."""
    import json

    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq
    import tifffile
    import xarray as xr
    from astropy.io import fits

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    before = set(folder.rglob("*"))
    rng = np.random.default_rng(0)
    (folder / "images").mkdir(exist_ok=True)
    for night in range(4):
        hdu = fits.PrimaryHDU(rng.integers(0, 1000, size=(64, 64), dtype=np.uint16))
        hdu.header.update({"CRPIX1": 1.0, "CRVAL1": 1000.0, "CRPIX2": 1.0, "CRVAL2": -32.0})
        hdu.header["OBJECT"] = "M31"
        hdu.writeto(folder / "images" / f"night_{night:02d}.fits", overwrite=True)

    def grid(times: Any) -> Any:
        shape = (len(times), 4, 6)
        ds = xr.Dataset(
            {
                "temperature": (("time", "lat", "lon"), rng.normal(280, 5, shape).astype("f4")),
                "pressure": (("time", "lat", "lon"), rng.normal(1000, 9, shape).astype("f8")),
            },
            coords={"time": times, "lat": np.linspace(-60, 60, 4), "lon": np.arange(6) * 60.0},
        )
        ds["temperature"].attrs["units"] = "K"
        return ds

    grid(np.arange(5)).to_netcdf(folder / "grid.nc", engine="h5netcdf")
    (folder / "parts").mkdir(exist_ok=True)
    for part in range(3):
        times = np.arange(4 * part, 4 * part + 4)
        grid(times).to_netcdf(folder / "parts" / f"part_{part}.nc", engine="h5netcdf")
    tifffile.imwrite(folder / "stack.tif", rng.integers(0, 255, (5, 32, 32), dtype=np.uint8))
    np.save(folder / "volume.npy", rng.random((16, 64, 64), dtype=np.float32))
    n = 5000
    readings = pa.table(
        {
            "t": np.arange(1_700_000_000, 1_700_000_000 + n, dtype=np.int64),
            "lat": rng.uniform(-30, 30, n),
            "lon": rng.uniform(0, 90, n),
            "site": [f"site-{i % 11}" for i in range(n)],
        }
    )
    pq.write_table(readings, folder / "readings.parquet")
    pacsv.write_csv(readings, folder / "readings.csv")
    people = [{"name": f"person {i}", "age": 20 + i % 50} for i in range(40)]
    (folder / "objects.jsonl").write_text("\n".join(json.dumps(p) for p in people) + "\n")
    (folder / "objects.json").write_text(json.dumps(people[:5]))
    (folder / "more.jsonl").write_text(
        '{"name": "Lucille Bluth", "age": 70}\n{"name": "Buster Bluth", "age": 32}\n'
    )
    # PTF nights (SDS/Q): the README's, docs/attached.md's, docs/cli.md's
    (folder / "nights").mkdir(exist_ok=True)
    for night in range(2):
        ptf_file(folder / f"ptf_night_{night}.h5", candidates=300, seed=night)
        ptf_file(folder / "nights" / f"night_{night}.h5", candidates=300, seed=night)
    ptf_file(folder / "ptf_small.h5", candidates=300, seed=0)
    # the taxi stream of docs/records.md
    (folder / "taxi.xml").write_text(DOCS_TAXI_DESCRIPTOR)
    lines = ["medallion,pickup_datetime,passenger_count,pickup_latitude,pickup_longitude"]
    for i in range(2000):
        lines.append(
            f"M{i % 37:04d},{1357000000 + i * 60},{rng.integers(1, 5)},"
            f"{40.70 + rng.random() * 0.1:.6f},{-73.95 + rng.random() * 0.1:.6f}"
        )
    (folder / "trips-2013-01.csv").write_text("\n".join(lines) + "\n")
    return sorted(p for p in folder.rglob("*") if p.is_file() and p not in before) or sorted(
        p for p in folder.rglob("*") if p.is_file()
    )
