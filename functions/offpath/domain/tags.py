"""A job's tags: up to MAX_TAGS `key: value` pairs given at submit, kept on the job and shown in its view, and a
listing's filter (`GET /jobs?tag=key:value`). Tags are the caller's words: never a secret, never parsed by
offpath beyond these rules."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from offpath.domain.errors import InvalidRequestError

MAX_TAGS = 10
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 128
# A key: a letter or digit, then letters, digits, '_', '.', '-' or '/'; never ':', which separates a filter's
# key from its value.
TAG_KEY_PATTERN = rf"[A-Za-z0-9][A-Za-z0-9_./-]{{0,{MAX_KEY_CHARS - 1}}}"
# A value: printable text without control characters, at most MAX_VALUE_CHARS.
TAG_VALUE_PATTERN = rf"[^\x00-\x1f\x7f]{{0,{MAX_VALUE_CHARS}}}"
# A listing's filter, `key:value` (the value may hold ':').
TAG_FILTER_PATTERN = rf"{TAG_KEY_PATTERN}:{TAG_VALUE_PATTERN}"

_KEY = re.compile(TAG_KEY_PATTERN)
_VALUE = re.compile(TAG_VALUE_PATTERN)
_FILTER = re.compile(TAG_FILTER_PATTERN)


def checked_tags(tags: Mapping[str, Any] | None, field: str = "tags") -> dict[str, str]:
    """The tags of a submit, checked; the refusal names the field and the rule, never echoes a value."""
    if not tags:
        return {}
    if len(tags) > MAX_TAGS:
        raise InvalidRequestError(field, f"{field} holds at most {MAX_TAGS} tags")
    for key, value in tags.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InvalidRequestError(
                field,
                f"a tag's key is 1 to {MAX_KEY_CHARS} characters: a letter or digit, then letters, digits, "
                "'_', '.', '-' or '/'",
            )
        if not isinstance(value, str) or not _VALUE.fullmatch(value):
            raise InvalidRequestError(
                f"{field}.{key}", f"a tag's value is text of at most {MAX_VALUE_CHARS} characters, no control ones"
            )
    return dict(sorted(tags.items()))


def tag_filter(text: str, field: str = "tag") -> tuple[str, str]:
    """`key:value` as a listing's filter."""
    if not _FILTER.fullmatch(text):
        raise InvalidRequestError(field, f"{field} must be key:value (a tag's key, ':', its value)")
    key, _, value = text.partition(":")
    return key, value
