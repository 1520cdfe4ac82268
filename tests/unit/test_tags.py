"""A job's tags (offpath.domain.tags): what a submit may carry and how a listing names one."""

from __future__ import annotations

import pytest

from offpath.domain.errors import InvalidRequestError
from offpath.domain.tags import MAX_TAGS, checked_tags, tag_filter


def test_tags_are_kept_sorted_by_key() -> None:
    assert list(checked_tags({"region": "eu", "customer": "acme"})) == ["customer", "region"]


def test_no_tags_is_an_empty_map() -> None:
    assert checked_tags(None) == {}
    assert checked_tags({}) == {}


def test_ten_tags_are_accepted_and_eleven_refused() -> None:
    ten = {f"k{n}": "v" for n in range(MAX_TAGS)}

    assert checked_tags(ten) == ten
    with pytest.raises(InvalidRequestError, match="at most 10 tags") as refused:
        checked_tags({**ten, "one-more": "v"})
    assert refused.value.field == "tags"


@pytest.mark.parametrize("key", ["", "-lead", "has space", "a:b", "x" * 65, "é", "a\nb"])
def test_a_bad_key_is_refused_without_echoing_it(key: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        checked_tags({key: "v"})

    assert refused.value.field == "tags"
    assert key not in str(refused.value) or key == ""


@pytest.mark.parametrize("value", ["a\x00b", "line\nbreak", "x" * 129, "\x7f"])
def test_a_bad_value_is_refused_naming_its_key(value: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        checked_tags({"customer": value})

    assert refused.value.field == "tags.customer"
    assert value not in str(refused.value)


def test_a_value_may_be_empty_or_hold_colons_and_any_printable_text() -> None:
    tags = {"empty": "", "url": "https://example.com:8443/x", "name": "Zoë's café"}

    assert checked_tags(tags) == dict(sorted(tags.items()))


def test_a_filter_splits_at_the_first_colon() -> None:
    assert tag_filter("url:https://example.com:8443") == ("url", "https://example.com:8443")
    assert tag_filter("empty:") == ("empty", "")


@pytest.mark.parametrize("text", ["no-colon", ":value", "bad key:v", "k:line\nbreak"])
def test_a_bad_filter_is_refused_naming_the_parameter(text: str) -> None:
    with pytest.raises(InvalidRequestError, match="key:value") as refused:
        tag_filter(text)

    assert refused.value.field == "tag"


def test_a_bad_key_is_refused_with_the_rule_in_full() -> None:
    with pytest.raises(InvalidRequestError) as refused:
        checked_tags({"-bad": "x"})

    assert (refused.value.field, str(refused.value)) == (
        "tags",
        "a tag's key is 1 to 64 characters: a letter or digit, then letters, digits, '_', '.', '-' or '/'",
    )


def test_a_bad_value_is_refused_with_the_rule_in_full() -> None:
    with pytest.raises(InvalidRequestError) as refused:
        checked_tags({"env": "a\nb"})

    assert (refused.value.field, str(refused.value)) == (
        "tags.env",
        "a tag's value is text of at most 128 characters, no control ones",
    )
