"""The exact tier's exceptions: one small hierarchy.

A ``MalformedInput`` means the file or the request cannot be read as a
bracket claim at all (exit 2). A false claim is never an exception: it is a
refuted ``Verdict``.
"""

__all__ = ["CertificateError", "MalformedInput", "LimitExceeded"]


class CertificateError(ValueError):
    """Base class of every error the exact tier raises on purpose."""


class MalformedInput(CertificateError):
    """Input that does not follow the bracket format or the exact-number grammar."""


class LimitExceeded(MalformedInput):
    """Input beyond a documented resource limit (``exact.limits``)."""
