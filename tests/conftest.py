"""Suite-wide setup: ``show``'s cache of renderings lives in a folder of this run's own, so no
test reads an entry an earlier run (or the user's own ``show``) left, or leaves one behind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _show_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:  # subprocesses inherit it too
        mp.setenv("BACKGEN_CACHE_DIR", str(tmp_path_factory.mktemp("show-cache")))
        yield
