"""The Database's method for SS-DB runs (a mixin of :class:`tesseradb.database.Database`)."""

from __future__ import annotations

from typing import Any

from tesseradb.errors import require_str
from tesseradb.kinds import DatabaseMethods

__all__ = ["SSDBMethods"]


class SSDBMethods(DatabaseMethods):
    def ssdb(
        self, run: str, config: str | None = None, params: str = "medium", seed: int = 0
    ) -> Any:
        """The SS-DB run called ``run`` (a :class:`tesseradb.ssdb.Run`): its images,
        observations, groups and queries.

        With ``config`` (``test``, ``tiny``, ``very-small``, ``small``, ...) a new,
        empty run is made with the ``params`` set (``easy``, ``medium``, ``hard``);
        ``run.load()`` then ingests, cooks and groups it. docs/ssdb.md explains it.
        """
        require_str(run, "run", "db.ssdb")
        from tesseradb.catalog import validate_name
        from tesseradb.ssdb._run import Run

        self._check_open()
        if config is None:
            return Run.open(self, run)
        validate_name(run, "SS-DB run")
        return Run.create(self, run, config, params, seed)
