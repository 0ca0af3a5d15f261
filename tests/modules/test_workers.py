"""The fuzzer's worker processes (fuzz/workers.py): a case that kills its process is a
``crash`` outcome of that seed, and the run goes on with the others, in order."""

from __future__ import annotations

import os

import pytest

from fuzz.check import Outcome
from fuzz.workers import Crashed, isolated, judged


def _judge(seed: int) -> Outcome:
    """Passes every seed but 3, whose process aborts as a corrupted heap makes it."""
    if seed == 3:
        os.abort()
    return Outcome("passed", detail=str(seed))


@pytest.mark.parametrize("jobs, alone", [(2, False), (1, True)])
def test_a_case_that_kills_its_process_is_a_crash_and_the_run_goes_on(jobs, alone) -> None:
    outcomes = list(judged(_judge, list(range(6)), jobs, "compiled crash", alone))
    assert [o.status for o in outcomes] == ["passed"] * 3 + ["wrong"] + ["passed"] * 2
    assert [o.detail for o in outcomes if o.status == "passed"] == ["0", "1", "2", "4", "5"]
    crash = outcomes[3]
    assert crash.kind == "compiled crash" and "killed by SIGABRT" in crash.detail, crash.line()


def _refuse(x: int) -> int:
    raise ValueError(f"not {x}")


def test_a_call_in_a_process_of_its_own_answers_raises_or_crashes() -> None:
    assert isolated(abs, -4) == 4
    with pytest.raises(ValueError, match="not 5"):
        isolated(_refuse, 5)
    with pytest.raises(Crashed, match="SIGABRT"):
        isolated(_judge, 3)
