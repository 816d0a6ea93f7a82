"""The words Spark searches a history's text for before a pattern (`spark_lines.parsed_lines`)
never lose a line the pattern matches: one of them is in every such line."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.spark_groups import _GROUP_LINE, _GROUP_WORDS
from checkers.spark_txn import _TXN_LINE, _TXN_WORDS

_PIECES = [
    '"f"',
    '"final"',
    ":",
    " ",
    "\t",
    '"subscribe"',
    '"commit"',
    '"txn"',
    "true",
    '"poll"',
    "{",
    ",",
    "x",
]
_lines = st.lists(st.sampled_from(_PIECES), max_size=12).map("".join)


@settings(max_examples=3000, deadline=None)
@given(_lines)
def test_every_line_a_pattern_matches_holds_one_of_its_words(line: str) -> None:
    for pattern, words in ((_GROUP_LINE, _GROUP_WORDS), (_TXN_LINE, _TXN_WORDS)):
        if re.search(pattern, line):
            assert any(word in line for word in words), (pattern, line)


def test_the_lines_the_checkers_read_match_and_hold_their_words() -> None:
    for pattern, words, line in (
        (_GROUP_LINE, _GROUP_WORDS, '{"index": 3, "f" : "subscribe", "group": "g"}'),
        (_GROUP_LINE, _GROUP_WORDS, '{"index":4,"f":"commit","offsets":[]}'),
        (_GROUP_LINE, _GROUP_WORDS, '{"index":5,"f":"assign","final": true}'),
        (_TXN_LINE, _TXN_WORDS, '{"index":6,"f":\t"txn","mops":[]}'),
    ):
        assert re.search(pattern, line) and any(word in line for word in words), line
