"""Runs in S3-compatible object storage (docs/storage.md): a hook whose out_dir is
``s3://bucket/prefix`` writes a local spool that the core's Shipper thread
(include/trainscope/spool.h) ships to the bucket; the hook closes it last."""
from __future__ import annotations

import logging

from . import _core
from ._errors import ConfigError

log = logging.getLogger("trainscope")


def start_shipper(location: str, where: str = "Hook", argument: str = "out_dir"):
    """Checks the URL and the bucket and starts shipping; ConfigError naming the URL (never a
    credential) when the bucket is missing, refuses the credentials or does not answer."""
    try:
        return _core.Shipper(location)
    except (ValueError, OSError, RuntimeError) as e:
        raise ConfigError(where, argument, location,
                          "s3://BUCKET/prefix of a bucket that exists and accepts the AWS "
                          "credentials of this machine (docs/storage.md)", str(e)) from None


def stop_shipper(shipper) -> None:
    """Ships what is left; what cannot be shipped stays in the spool (said once)."""
    if shipper is None:
        return
    try:
        left = shipper.stop()
    except Exception as e:  # noqa: BLE001 - never an error into the training
        left = str(e)
    if left:
        log.warning("trainscope: %s", left)
