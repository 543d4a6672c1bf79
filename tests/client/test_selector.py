"""Tag expressions as the SDK takes them: what RocketMQ's client accepts and refuses."""

from __future__ import annotations

import pytest

from rocklet.client.selector import MessageSelector, SelectorError, as_selector


@pytest.mark.parametrize(
    ("given", "tags"),
    [
        ("*", None),
        ("", None),
        ("  ", None),
        ("TagA", {"TagA"}),
        ("a || b", {"a", "b"}),
        ("a||", {"a"}),
    ],
)
def test_tag_expressions_name_their_tags(given: str, tags: set[str] | None) -> None:
    selector = as_selector(given)
    assert selector.is_tag
    assert selector.tags() == (None if tags is None else frozenset(tags))


@pytest.mark.parametrize("given", ["||", " || ", "|| ||"])
def test_separators_without_a_tag_are_refused(given: str) -> None:
    # Java's FilterAPI throws "subString split error"; reading it as "every message"
    # would deliver what the subscriber meant to filter out.
    with pytest.raises(SelectorError, match="names no tag"):
        MessageSelector.by_tag(given)
    with pytest.raises(SelectorError):
        as_selector(given)
