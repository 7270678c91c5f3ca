"""The drift diff keeps removed and added lines apart even without a final newline."""

from __future__ import annotations

from scopelens.core.audit.drift import _diff
from tests.support.factories import make_snapshot


def test_last_lines_without_newline_stay_on_their_own_lines():
    then = make_snapshot("s1", "sess", texts=("a\nold last",))[0].selected[0]
    now = make_snapshot("s2", "sess", texts=("a\nnew last",))[0].selected[0]
    lines = _diff(then, now).splitlines()
    assert "-old last" in lines and "+new last" in lines
    assert lines.count("\\ No newline at end of file") == 2
