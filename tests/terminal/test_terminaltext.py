"""fleet.terminal.text: what a terminal would obey or hide is shown as an escape, what a
reader needs (letters of any script, tabs, line breaks of multi-line text) is left alone, Rich
never reads host text as markup, and JSON keeps the text exact."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from fleet.terminal.text import cell, json_text, visible

ORDINARY = [
    "",
    "box1 | gateway ready on 5.0.1-0123456789ab (pid 4242)",
    "plain ASCII with punctuation: [x] {y} (z) <w> ~!@#$%^&*_+-=|;'\",./?`",
    "C:\\Users\\ops\\fleet and a backslash at the end \\",
    "Umlaute äöü ß, accents é è ç, Ελληνικά, русский, العربية, עברית, 日本語, 한국어, हिन्दी",
    "emoji 👍 and symbols ±×÷ → ✓ ★",
    "a\ttab-separated\tline",
    "non-breaking\u00a0space and ideographic\u3000space",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_unchanged(text):
    assert visible(text) == text
    assert visible(text, multiline=True) == text
    assert cell(text).plain == text


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b[2Jcleared", "\\x1b[2Jcleared"),  # ESC of a CSI sequence
    ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # OSC: window title, BEL
    ("\x1b]8;;http://evil.example\x1b\\CLICK\x1b]8;;\x1b\\",
     "\\x1b]8;;http://evil.example\\x1b\\CLICK\\x1b]8;;\\x1b\\"),  # OSC 8 hyperlink
    ("\x00nul\x08bs\x7fdel", "\\x00nul\\x08bs\\x7fdel"),
    ("over\rwrite", "over\\rwrite"),
    ("\x9b31mC1 CSI\x85NEL", "\\x9b31mC1 CSI\\x85NEL"),
    ("abc\u202efed", "abc\\u202efed"),  # RIGHT-TO-LEFT OVERRIDE
    ("\u2066isolate\u2069 \u200emark\u200f \u061c",
     "\\u2066isolate\\u2069 \\u200emark\\u200f \\u061c"),
    ("box\u200b1 zero\u200dwidth \ufeffbom \u2060wj \u00adshy",
     "box\\u200b1 zero\\u200dwidth \\ufeffbom \\u2060wj \\xadshy"),
    ("tag\U000e0041\U000e007f", "tag\\U000e0041\\U000e007f"),  # invisible tag characters
    ("line\u2028para\u2029", "line\\u2028para\\u2029"),
    ("lone \udc80 surrogate", "lone \\udc80 surrogate"),
])
def test_controls_and_invisible_formatting_are_made_visible(raw, shown):
    assert visible(raw) == shown
    assert visible(shown) == shown  # idempotent: an escape is printable ASCII


def test_newlines_stay_only_in_multi_line_text():
    text = "first line\nsecond\tline\n"
    assert visible(text, multiline=True) == text
    assert visible(text) == "first line\\nsecond\tline\\n"  # a line of fleet's own cannot be forged
    assert visible("a\r\nb", multiline=True) == "a\\r\nb"


def test_anything_is_shown_as_its_text():
    assert visible(None) == "None" and visible(4242) == "4242"
    assert visible(ValueError("bad\x1b[31m")) == "bad\\x1b[31m"


def _rendered(renderable, force_terminal: bool) -> str:
    console = Console(width=200, record=True, force_terminal=force_terminal,
                      color_system="truecolor" if force_terminal else None)
    console.print(renderable)
    return console.export_text(styles=force_terminal)


def test_a_cell_is_never_markup_or_an_emoji_code():
    hostile = "[link=http://evil.example]CLICK[/link] [bold red]loud[/] :skull: \x1b[5m"
    for terminal in (False, True):
        out = _rendered(cell(hostile), terminal)
        assert "[link=http://evil.example]CLICK[/link] [bold red]loud[/] :skull: \\x1b[5m" in out
        assert "\x1b]8;" not in out and "💀" not in out
    assert cell("x", "bold red").style == "bold red"
    assert cell("two\nlines").plain == "two\nlines"  # a line break stays inside its cell


def test_json_keeps_the_exact_text_with_json_escaping_only():
    text = ("\x1b[2J \x9b \x7f \u202e \u200b \U000e0041 \u2028 \udc80 tab\t nl\n "
            "é 日本 👍 [link=x]y[/link]")
    for kwargs in ({"ensure_ascii": False}, {"indent": 2, "sort_keys": True}):
        out = json_text({"line": text, "n": [1, None]}, **kwargs)
        assert json.loads(out) == {"line": text, "n": [1, None]}
        raw = set(out) - set("\n")
        assert not raw & set("\x1b\x9b\x7f\u202e\u200b\U000e0041\u2028\udc80\t")
    assert json_text({"line": "é 日本 👍"}, ensure_ascii=False) == '{"line": "é 日本 👍"}'
    assert json_text({"a": "b"}, indent=2) == json.dumps({"a": "b"}, indent=2)
    assert "\\udb40\\udc41" in json_text("\U000e0041", ensure_ascii=False)  # UTF-16 pair
