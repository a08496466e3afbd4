"""The OpenAPI description of the server's HTTP API (served at ``/openapi.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["OPENAPI"]


def _op(
    summary: str,
    *,
    body: str | None = None,
    query: Sequence[str] = (),
    returns: str = "application/json",
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "security": [{"token": []}],
        "responses": {
            "200": {"description": "done", "content": {returns: {}}},
            "400": {"description": "bad input: {error, type}"},
            "401": {"description": "no token, or an unknown or revoked one"},
            "403": {"description": "the user's rights do not allow it, or the server is read-only"},
            "404": {"description": "no such object"},
        },
    }
    if query:
        op["parameters"] = [
            {"name": q, "in": "query", "required": False, "schema": {"type": "string"}}
            for q in query
        ]
    if body:
        op["requestBody"] = {"required": True, "content": {body: {}}}
    return op


_NAME = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
_QID = [{"name": "qid", "in": "path", "required": True, "schema": {"type": "string"}}]

OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "TesseraDB server",
        "version": "1",
        "description": (
            "SQL, Argo/SQL, the catalog, array slabs and images, record ingest and ranges, "
            "and documents of one database. Every path but /health and the console needs "
            "Authorization: Bearer <token> (tessera user add). Errors are JSON "
            "{error, type}."
        ),
    },
    "components": {"securitySchemes": {"token": {"type": "http", "scheme": "bearer"}}},
    "paths": {
        "/health": {"get": {"summary": "the server is up (no token needed)", "responses": {"200": {"description": "ok"}}}},
        "/api/whoami": {"get": _op("the token's user and rights")},
        "/sql": {
            "post": _op(
                "run a statement: body {sql, params?, query_id?, offset?, limit?}; the rows "
                "stream back as Arrow IPC, JSON or CSV by Accept or ?format=; 408 past the "
                "time limit, 409 cancelled",
                body="application/json",
                query=["format"],
                returns="application/vnd.apache.arrow.stream",
            )
        },
        "/explain": {"post": _op("what a statement reads: body {sql, params?}", body="application/json")},
        "/session": {"delete": _op("end the SQL session the X-Tessera-Session header names (an open transaction is rolled back)")},
        "/argo": {"post": _op("an Argo/SQL statement: body {statement, params?}", body="application/json")},
        "/queries": {"get": _op("the running statements (yours; an admin's: all)")},
        "/queries/{qid}": {"get": {**_op("a running statement's progress"), "parameters": _QID}},
        "/queries/{qid}/cancel": {"post": {**_op("stop a running statement (it keeps nothing)"), "parameters": _QID}},
        "/catalog": {"get": _op("every object you may read: name, kind, rows, bytes, times")},
        "/objects/{name}": {"get": {**_op("an object's schema, size, versions, indexes, files"), "parameters": _NAME}},
        "/check": {"get": _op("the database's check report")},
        "/arrays/{name}/slab": {
            "get": {
                **_op(
                    "a box of an array: box=lo:hi,i,... (indexes), attr(s)=, version=; "
                    "format npy|arrow|json|png (png: cmap=gray|viridis|magma|hot, vmin=, vmax=, "
                    "max_side=); 413 past the server's cell limit",
                    query=["box", "attr", "attrs", "version", "format", "cmap", "vmin", "vmax", "max_side"],
                    returns="application/x-npy",
                ),
                "parameters": _NAME,
            }
        },
        "/arrays/{name}/cell": {"get": {**_op("one cell's attributes: at=i,j,...", query=["at", "version"]), "parameters": _NAME}},
        "/streams/{name}/range": {
            "get": {
                **_op("records with field=lo:hi for each given field; columns=, limit=, format arrow|json", query=["columns", "limit", "format"], returns="application/vnd.apache.arrow.stream"),
                "parameters": _NAME,
            }
        },
        "/streams/{name}/plot": {
            "get": {
                **_op("a PNG plot of y= against x= over field=lo:hi ranges; kind scatter|line", query=["x", "y", "kind", "width", "height"], returns="image/png"),
                "parameters": _NAME,
            }
        },
        "/streams/{name}/ingest": {
            "post": {
                **_op("ingest records (an Arrow IPC stream body); answered once durable", body="application/vnd.apache.arrow.stream"),
                "parameters": _NAME,
            }
        },
        "/collections/{name}/insert": {"post": {**_op("insert a JSON object or a list of them", body="application/json"), "parameters": _NAME}},
        "/collections/{name}/load": {"post": {**_op("load JSON lines", body="application/x-ndjson"), "parameters": _NAME}},
        "/load": {"post": _op("admins: load a file on the server's machine: body {source, into?, kind?, options?}; listed with its progress in /queries while it runs", body="application/json")},
        "/collections/{name}/documents": {"get": {**_op("a page of documents: offset=, limit=", query=["offset", "limit"]), "parameters": _NAME}},
    },
}  # fmt: skip
