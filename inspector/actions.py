"""Every key binding and command of the inspector, declared once.

Footer bindings, the command palette and the help screen are all derived from
:data:`ACTIONS`, so a key cannot be in the footer but missing from help, or the reverse.
Each action has an id (so users can remap keys), a tooltip, and a palette title
``noun: verb``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from textual.binding import Binding, BindingType
from textual.keys import format_key


@dataclass(frozen=True)
class Action:
    id: str
    key: str
    action: str
    description: str
    tooltip: str
    title: str
    """Command palette title, ``noun: verb``."""
    scope: str
    """``app`` or the name of the screen the action belongs to."""
    show: bool = True


ACTIONS: tuple[Action, ...] = (
    Action("app.help", "question_mark", "app.open_help", "Help", "Every key and command", "help: show", "app"),
    Action("app.theme", "ctrl+t", "app.toggle_theme", "Theme", "Switch light/dark theme", "theme: toggle", "app"),
    Action("app.quit", "q", "app.quit", "Quit", "Leave the inspector", "inspector: quit", "app"),
    Action("app.back", "escape", "app.back", "Back", "Back to the previous screen", "screen: back", "app"),
    Action("sessions.open", "enter", "open_session", "Open", "Open the highlighted session's timeline", "session: open", "sessions"),
    Action("sessions.findings", "f", "open_findings", "Findings", "What went wrong in the recorded sessions, and where",
           "findings: list", "sessions"),
    Action("sessions.filter", "slash", "focus_filter", "Filter", "Filter sessions as you type", "sessions: filter", "sessions"),
    Action("sessions.sort", "s", "cycle_sort", "Sort", "Sort by the next column", "sessions: sort", "sessions"),
    Action("sessions.reverse", "r", "reverse_sort", "Reverse", "Reverse the sort order", "sessions: reverse order", "sessions"),
    Action("sessions.more", "m", "load_more", "More", "Load the next page of sessions", "sessions: load more", "sessions"),
    Action("sessions.copy", "c", "copy_id", "Copy id", "Copy the highlighted session id", "session: copy id", "sessions"),
    Action("timeline.next", "n", "next_turn", "Next turn", "Move to the next turn", "turn: next", "timeline"),
    Action("timeline.prev", "p", "prev_turn", "Prev turn", "Move to the previous turn", "turn: previous", "timeline"),
    Action("timeline.open", "enter", "open_snapshot", "Snapshot", "Open the snapshot of the highlighted event", "snapshot: open", "timeline"),
    Action("timeline.cites", "j", "jump_to_citations", "Cited items", "From a reply to the items it cites (✗: not shown)",
           "reply: jump to cited items", "timeline"),
    Action("timeline.drift", "d", "session_drift", "Drift", "Drift of every snapshot in this session", "session: drift", "timeline"),
    Action("timeline.copy", "c", "copy_id", "Copy id", "Copy the session id", "session: copy id", "timeline"),
    Action("timeline.more", "m", "load_more", "More", "Read the next page of turns (long imported sessions)", "timeline: load more turns",
           "timeline"),
    Action("snapshot.drift", "d", "drift", "Drift", "Compare this snapshot with today's index", "snapshot: drift", "snapshot"),
    Action("snapshot.whynot", "w", "why_not", "Why not?", "Ask where a path, symbol or text dropped out", "snapshot: why not", "snapshot"),
    Action("snapshot.jump", "j", "jump", "Jump", "Follow the highlighted citation to its item", "citation: jump to item", "snapshot"),
    Action("snapshot.reply", "g", "go_to_reply", "Reply", "Go to the reply that cites the highlighted item, in the timeline",
           "citation: go to the citing reply", "snapshot"),
    Action("snapshot.more", "m", "load_more", "More", "Load the next page of candidates", "candidates: load more", "snapshot"),
    Action("snapshot.sort", "s", "cycle_sort", "Sort", "Sort candidates by the next column", "candidates: sort", "snapshot"),
    Action("snapshot.reverse", "r", "reverse_sort", "Reverse", "Reverse the candidates' sort order", "candidates: reverse order", "snapshot"),
    Action("snapshot.filter", "slash", "focus_filter", "Filter", "Filter candidates by source_ref or reason", "candidates: filter", "snapshot"),
    Action("snapshot.trimmed", "t", "toggle_trimmed", "Trimmed", "Show or hide the lines the budget trimmed (never seen by the model)",
           "evidence: show trimmed lines", "snapshot"),
    Action("snapshot.next", "n", "step_snapshot(1)", "Next", "Open the session's next snapshot on the same tab",
           "snapshot: next in session", "snapshot"),
    Action("snapshot.prev", "p", "step_snapshot(-1)", "Prev", "Open the session's previous snapshot on the same tab",
           "snapshot: previous in session", "snapshot"),
    Action("snapshot.copy", "c", "copy_id", "Copy id", "Copy the snapshot id", "snapshot: copy id", "snapshot"),
    *(
        Action(f"snapshot.tab.{name}", key, f"show_tab('{name}')", name.title(), f"Show the {name} tab",
               f"tab: {name}", "snapshot", show=False)
        for key, name in zip(("1", "2", "3", "4", "5", "6", "7"),
                             ("scope", "plan", "funnel", "candidates", "evidence", "citations", "request"), strict=True)
    ),
    Action("observed.next", "n", "step_call(1)", "Next call", "The session's next model call", "call: next in session", "observed"),
    Action("observed.prev", "p", "step_call(-1)", "Prev call", "The session's previous model call", "call: previous in session",
           "observed"),
    Action("observed.counterfactual", "r", "open_counterfactual", "Retrieval", "What scoped retrieval would have given at this turn",
           "call: open its counterfactual retrieval", "observed"),
    Action("observed.copy", "c", "copy_id", "Copy id", "Copy the snapshot id", "observed snapshot: copy id", "observed"),
    Action("drift.compute", "r", "compute", "Run drift", "Re-run the recorded plan against today's index", "drift: run", "drift"),
    Action("drift.diff", "enter", "show_diff", "Diff", "Show the diff of the highlighted item", "drift: show diff", "drift"),
    Action("input.leave", "escape", "leave", "Clear", "Clear the text; on an empty input, back to the table",
           "input: clear or leave", "input"),
    Action("whynot.ask", "enter", "ask", "Ask", "Answer for the typed source_ref, path, symbol or text", "why-not: ask", "whynot", show=False),
    Action("whynot.open", "enter", "open_match", "Open row", "Open the highlighted match's row on the snapshot screen", "why-not: open row", "whynot"),
    Action("help.everything", "a", "toggle_everything", "Everything", "Every screen's keys, or back to this screen's", "help: toggle everything", "help"),
    Action("findings.open", "enter", "open_finding", "Open", "Open what the highlighted finding is about: its citation, item, row or event",
           "finding: open", "findings"),
    Action("findings.turn", "t", "open_turn", "Turn", "Open the finding's turn in its session's timeline",
           "finding: open its turn in the timeline", "findings"),
)

def bindings_for(scope: str) -> list[BindingType]:
    """The footer bindings of one screen (or of the app)."""
    return [
        Binding(a.key, a.action.removeprefix("app.") if scope == "app" else a.action, a.description,
                show=a.show, tooltip=a.tooltip, id=a.id)
        for a in ACTIONS
        if a.scope == scope
    ]


WITH_INPUTS = frozenset({"sessions", "snapshot", "whynot"})
"""Screens with a text field, where the input's own keys (esc) apply too."""


def actions_for(scope: str) -> list[Action]:
    """The actions of one screen (and of its text fields), then the app-wide ones."""
    own = [a for a in ACTIONS if a.scope == scope or (a.scope == "input" and scope in WITH_INPUTS)]
    return own + [a for a in ACTIONS if a.scope == "app" != scope]


def effective_key(action: Action, keymap: Mapping[str, str]) -> str:
    """The key(s) that run ``action`` once the user's keymap is applied (comma-separated)."""
    return keymap.get(action.id) or action.key


def key_label(keys: str) -> str:
    """Keys as a person reads them (help, palette, keymap problems): ``?``, ``/``, ``esc``, ``enter``, ``ctrl+t``."""
    return ", ".join("enter" if key == "enter" else format_key(key) for key in keys.split(","))
