"""Tools for testing TesseraDB and what is built on it: the crash matrix (:mod:`.crash`)."""
