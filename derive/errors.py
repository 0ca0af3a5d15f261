"""The pipeline's error types: each names the op, the definition and the problem in one line."""

from __future__ import annotations


class DerivationError(Exception):
    """An op definition the pipeline cannot derive, simplify or emit.

    The message leads with the op and the offending definition so a user can find the line in
    their own file without reading a SymPy traceback.
    """

    def __init__(self, op: str, problem: str, definition: str | None = None) -> None:
        self.op = op
        self.definition = definition
        self.problem = problem
        where = f"op '{op}'" + (f", definition `{definition}`" if definition else "")
        super().__init__(f"{where}: {problem}")


class EngineBug(DerivationError):
    """The engine caught its own result breaking an invariant (an index read outside its sum):
    the op is refused rather than lowered, and the fuzzer counts it as wrong, not refused."""

    def __init__(self, op: str, problem: str) -> None:
        super().__init__(op, f"internal error: {problem} (an engine bug: please report it)")


class CheckFailed(AssertionError):
    """A generated module that disagrees with its own definitions; the message is one line."""


class OutputError(Exception):
    """A path the writer will not write: not a folder, or a file the generator did not make."""
