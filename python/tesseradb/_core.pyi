"""Typed stub of the Rust extension module ``tesseradb._core``."""

__all__ = ["__version__", "build_info"]

__version__: str

def build_info() -> dict[str, str | int]:
    """Facts about this build of the Rust kernels.

    Returns
    -------
    dict
        ``version`` (the crate version, equal to the package version),
        ``profile`` (``release`` or ``debug``), ``target_arch``, ``target_os``
        and ``threads`` (the size of the rayon pool the kernels share).
    """
