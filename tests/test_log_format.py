"""toolbridge's log records: upstream text in them can neither forge a record nor act on the terminal."""

from __future__ import annotations

import io
import logging

import pytest

from proxy import errors
from proxy.ops import SafeFormatter

FORGED_RECORD = "1999-01-01 00:00:00,000 ERROR proxy: FORGED"
FORGED = f"boom \x1b[31mred\x1b[0m \x1b]0;PWNED\x07 over\rwritten\u2028x\n{FORGED_RECORD}"


def written(emit: object) -> str:
    """What the `serve` formatter writes for the records `emit(logger)` logs."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(SafeFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.Logger("proxy.test")
    logger.addHandler(handler)
    emit(logger)  # type: ignore[operator]
    return stream.getvalue()


def assert_inert(text: str) -> None:
    assert not any(c in text for c in "\x1b\r\x07\u2028")
    assert not [line for line in text.splitlines() if line.startswith("1999-")]


def test_a_record_quoting_an_upstream_stays_one_inert_line() -> None:
    text = written(lambda log: log.warning("server %s: %s", "evil", FORGED))
    assert text.count("\n") == 1 and text.endswith(f"proxy.test: server evil: boom \\x1b[31mred\\x1b[0m "
                                                   f"\\x1b]0;PWNED\\x07 over\\rwritten\\u2028x\\n{FORGED_RECORD}\n")
    assert_inert(text)


def test_a_traceback_keeps_its_lines_but_none_can_pass_for_a_record() -> None:
    def fail(log: logging.Logger) -> None:
        try:
            raise RuntimeError(FORGED)
        except RuntimeError:
            log.exception("call failed")

    text = written(fail)
    first, *rest = text.splitlines()
    assert first.endswith("proxy.test: call failed") and rest[0] == "  Traceback (most recent call last):"
    assert all(line.startswith("  ") for line in rest) and "RuntimeError: boom" in text
    assert_inert(text)


def test_records_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "_known_secrets", set())
    errors.remember_secrets({"hdr-literal-0b8f3e91c4"})
    text = written(lambda log: log.error("upstream said %r", "bad key hdr-literal-0b8f3e91c4"))
    assert "hdr-literal" not in text and "bad key [REDACTED]" in text
