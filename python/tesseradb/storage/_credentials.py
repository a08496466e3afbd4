"""Credentials and endpoint of an S3-compatible object store, from the standard places.

The order is the AWS tools' own: explicit ``storage_options`` first, then a named
profile (``profile=`` or ``AWS_PROFILE``), then the ``AWS_*`` environment variables,
then the ``default`` profile of ``~/.aws/credentials`` and ``~/.aws/config``. When none
names keys and access is not anonymous, the libraries' own chain (instance roles,
web identity) is asked. Secrets are kept out of ``repr``, the catalog, logs and every
error message: :meth:`Credentials.redact` scrubs library errors before they are shown.
"""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tesseradb.errors import InvalidArgumentError

__all__ = ["OPTION_NAMES", "Credentials", "resolve_credentials"]

# what storage_options= accepts (boolean ones as bools)
OPTION_NAMES = frozenset(
    {
        "endpoint_url",
        "region",
        "access_key_id",
        "secret_access_key",
        "session_token",
        "profile",
        "anonymous",
        "allow_http",
        "force_path_style",
    }
)
_BOOLEAN = frozenset({"anonymous", "allow_http", "force_path_style"})
_DEFAULT_REGION = "us-east-1"  # what the AWS tools assume when nothing names one


@dataclass(frozen=True)
class Credentials:
    """Where an S3-compatible store is and how to sign requests to it."""

    region: str
    endpoint_url: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    anonymous: bool = False
    allow_http: bool = False
    force_path_style: bool = False

    @property
    def has_keys(self) -> bool:
        return bool(self.access_key_id and self.secret_access_key)

    def redact(self, text: str) -> str:
        """``text`` with every secret this holds replaced by ``***``."""
        for secret in (self.secret_access_key, self.session_token, self.access_key_id):
            if secret and len(secret) >= 4:
                text = text.replace(secret, "***")
        return text

    def describe(self) -> str:
        """Where requests go, for messages (no secret)."""
        return f"endpoint {self.endpoint_url}" if self.endpoint_url else f"region {self.region}"


def resolve_credentials(
    options: dict[str, Any] | None, where: str, environ: dict[str, str] | None = None
) -> Credentials:
    """The credentials ``options`` (``storage_options=``) and the environment give."""
    env = dict(os.environ if environ is None else environ)
    given = dict(options or {})
    unknown = sorted(set(given) - OPTION_NAMES)
    if unknown:
        raise InvalidArgumentError(
            f"{where}: unknown storage option(s) {', '.join(map(repr, unknown))}; "
            f"the options are {', '.join(sorted(OPTION_NAMES))}"
        )
    for name, value in given.items():
        wanted = bool if name in _BOOLEAN else str
        if value is not None and not isinstance(value, wanted):
            # (the value itself is not shown: it may be a secret)
            raise InvalidArgumentError(
                f"{where}: storage option {name!r} must be a {wanted.__name__}, "
                f"not {type(value).__name__}"
            )
    profile_name = given.get("profile") or env.get("AWS_PROFILE")
    named_profile = _profile(profile_name, env, where) if profile_name else {}
    default_profile = {} if profile_name else _profile("default", env, where, required=False)

    def pick(option: str, env_names: tuple[str, ...], profile_key: str) -> str | None:
        if given.get(option):
            return str(given[option])
        if named_profile.get(profile_key):
            return named_profile[profile_key]
        for name in env_names:
            if env.get(name):
                return env[name]
        return default_profile.get(profile_key) or None

    endpoint = pick("endpoint_url", ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"), "endpoint_url")
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise InvalidArgumentError(
            f"{where}: the S3 endpoint {endpoint!r} must be an http:// or https:// URL"
        )
    region = pick("region", ("AWS_REGION", "AWS_DEFAULT_REGION"), "region") or _DEFAULT_REGION
    anonymous = bool(given.get("anonymous", False))
    if not anonymous and env.get("AWS_SKIP_SIGNATURE", "").lower() in ("1", "true"):
        anonymous = True
    keys: dict[str, str | None] = {"access_key_id": None, "secret_access_key": None}
    token: str | None = None
    if not anonymous:
        keys["access_key_id"] = pick("access_key_id", ("AWS_ACCESS_KEY_ID",), "aws_access_key_id")
        keys["secret_access_key"] = pick(
            "secret_access_key", ("AWS_SECRET_ACCESS_KEY",), "aws_secret_access_key"
        )
        token = pick("session_token", ("AWS_SESSION_TOKEN",), "aws_session_token")
        if bool(keys["access_key_id"]) != bool(keys["secret_access_key"]):
            missing = "secret_access_key" if keys["access_key_id"] else "access_key_id"
            raise InvalidArgumentError(
                f"{where}: an S3 key pair needs both access_key_id and secret_access_key; "
                f"{missing} is missing"
            )
    # a custom endpoint (MinIO, Ceph, a local gateway) is addressed by path, and an
    # http:// one needs plain HTTP allowed; AWS itself by virtual host over HTTPS
    allow_http = given.get("allow_http")
    force_path_style = given.get("force_path_style")
    return Credentials(
        region=region,
        endpoint_url=endpoint.rstrip("/") if endpoint else None,
        access_key_id=keys["access_key_id"],
        secret_access_key=keys["secret_access_key"],
        session_token=token,
        anonymous=anonymous,
        allow_http=bool(endpoint and endpoint.startswith("http://"))
        if allow_http is None
        else allow_http,
        force_path_style=(endpoint is not None) if force_path_style is None else force_path_style,
    )


def _profile(name: str, env: dict[str, str], where: str, required: bool = True) -> dict[str, str]:
    """The keys of profile ``name`` in the shared credentials and config files."""
    home = Path(env.get("HOME") or Path.home())
    credentials_file = Path(env.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials")
    config_file = Path(env.get("AWS_CONFIG_FILE") or home / ".aws" / "config")
    found: dict[str, str] = {}
    seen = False
    for path, section in (
        (config_file, name if name == "default" else f"profile {name}"),
        (credentials_file, name),
    ):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(path, encoding="utf-8")
        except (OSError, configparser.Error) as err:
            raise InvalidArgumentError(
                f"{where}: the AWS file {path} cannot be read ({type(err).__name__})"
            ) from None
        if parser.has_section(section):
            seen = True
            found.update({k: v.strip() for k, v in parser.items(section)})
    if required and not seen:
        raise InvalidArgumentError(
            f"{where}: the AWS profile {name!r} is in neither {credentials_file} nor {config_file}"
        )
    return found
