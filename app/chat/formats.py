"""What each conversation's replies are held to, kept between requests: its constraint
checked and compiled once (off the GUI thread) and reused by every request, what the last
reply with tools did with that constraint (joined with the tools, or paused), what Corral
cannot enforce of its tools, and from all of it the chips above the composer (ChipState).

The ChatController owns one ConversationFormats and forwards its signals for the open
conversation; the schema preferences (tight defaults, strict schemas, closing loops) live
here because every constraint is compiled with them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from PySide6.QtCore import QObject, Signal

from app.constraints import Checked, check_spec, spec_from_dict, spec_to_dict
from app.jobs.engine_bridge import EngineBridge
from app.jobs.thread import run_task
from app.store import Conversation, Store
from app.tools import enabled_tool_definitions, enabled_tool_warnings
from engine.constraints.validate import constraint_notes
from engine.types import ChatResult, ConstraintSpec, ConstraintUse, SchemaOptions


@dataclass(frozen=True)
class ChipState:
    """What the chips above the composer show for the open conversation."""

    constraint: ConstraintSpec | None = None
    # with tools on: the constraint joined with them (a reply fits it or is a tool call),
    # or paused (only calls are allowed, or the model's calls could pass for its text)
    constraint_use: ConstraintUse | None = None
    tools: tuple[str, ...] = ()
    tool_choice: str = "auto"
    tool_warnings: tuple[str, ...] = ()
    # what the tight defaults do to the constraint ("declared keys only", ...) and what
    # Corral cannot enforce of it (keywords and formats compiled leniently)
    constraint_tight: tuple[str, ...] = ()
    constraint_warnings: tuple[str, ...] = ()


class ConversationFormats(QObject):
    """Per conversation id: its compiled constraint, the constraint's use with tools, and
    its tools' warnings. `changed(id)` fires when that conversation's chips change;
    `problem(id, text)` when its stored constraint no longer checks."""

    changed = Signal(int)
    problem = Signal(int, str)

    def __init__(self, store: Store, bridge: EngineBridge, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.bridge = bridge
        self._constraints: dict[int, ConstraintSpec] = {}
        self._constraint_use: dict[int, ConstraintUse] = {}
        self._tool_warnings: dict[int, tuple[str, ...]] = {}
        # how JSON schemas are followed (Preferences)
        self.schema_options = SchemaOptions()
        self.close_loops = True

    def set_schema_preferences(self, options: SchemaOptions, close_loops: bool) -> bool:
        """How JSON schemas are followed from now on; True if constraints must be checked
        again (the caller prepares the open conversation's)."""
        changed = options != self.schema_options
        self.schema_options, self.close_loops = options, close_loops
        if changed:
            self._constraints.clear()
        return changed

    def forget(self, conversation_id: int) -> None:
        """The conversation went back to no constraint (a new chat reusing an empty one)."""
        self._constraints.pop(conversation_id, None)
        self._constraint_use.pop(conversation_id, None)

    def prepare(self, conversation_id: int) -> None:
        """Check the conversation's constraint and tools off the GUI thread (once each)."""
        self._prepare_constraint(conversation_id)
        self._check_tools(conversation_id)

    def set_constraint(
        self, conversation_id: int, spec: ConstraintSpec | None, path: str | None = None
    ) -> None:
        """Store `spec` (checked and compiled: see app.constraints) as the conversation's
        constraint, or lift it."""
        if spec is not None and spec.options != self.schema_options:
            spec = replace(spec, options=self.schema_options, compiled=None)
        stored = spec_to_dict(spec, path) if spec is not None else None
        self.store.set_constraint(conversation_id, stored)
        self._constraint_use.pop(conversation_id, None)
        if spec is not None and spec.compiled is not None:
            self._constraints[conversation_id] = spec
        else:
            self._constraints.pop(conversation_id, None)
            self._prepare_constraint(conversation_id)

    def tools_changed(self, conversation_id: int) -> None:
        """The conversation's tools changed: what the constraint does with them, and the
        tools' warnings, are found again."""
        self._constraint_use.pop(conversation_id, None)
        self._check_tools(conversation_id)

    def constraint_for(self, conv: Conversation) -> ConstraintSpec | None:
        """The conversation's constraint: the compiled one if it is still the stored one."""
        if not conv.constraint:
            return None
        stored = replace(spec_from_dict(conv.constraint), options=self.schema_options)
        compiled = self._constraints.get(conv.id)
        return compiled if compiled == stored else stored  # equality ignores `compiled`

    def chip_state(self, conv: Conversation | None) -> ChipState:
        """The constraint and tools chips of `conv`."""
        if conv is None:
            return ChipState()
        constraint = self.constraint_for(conv)
        tools = enabled_tool_definitions(conv.tools)
        names = tuple(str(t.get("function", t).get("name", "?")) for t in tools)
        choice = conv.tools.tool_choice if tools else "auto"
        use: ConstraintUse | None = None
        if constraint is not None and tools:
            if choice == "none":
                use = "alone"
            elif choice != "auto":
                use = "paused"  # "required" or a named tool: only calls may be written
            else:  # joined, unless the last reply found the model's calls could pass for it
                use = self._constraint_use.get(conv.id, "with_tools")
        compiled = constraint.compiled if constraint is not None else None
        return ChipState(
            constraint=constraint,
            constraint_use=use,
            tools=names,
            tool_choice=choice,
            tool_warnings=self._tool_warnings.get(conv.id, ()) if tools else (),
            constraint_tight=compiled.notes if compiled is not None else (),
            constraint_warnings=tuple(constraint_notes(constraint)[0]) if constraint else (),
        )

    def note_outcome(self, conversation_id: int | None, result: ChatResult) -> None:
        """Keep what a reply with tools did with the constraint, and its tool warnings."""
        if conversation_id is None or result.error is not None:
            return
        if result.constraint_use is not None:
            self._constraint_use[conversation_id] = result.constraint_use
        if result.warnings:
            self._tool_warnings[conversation_id] = tuple(result.warnings)
        if result.constraint_use is not None or result.warnings:
            self.changed.emit(conversation_id)

    def _prepare_constraint(self, conversation_id: int) -> None:
        """Check and compile a stored constraint off the GUI thread, once per session."""
        conv = self.store.conversation(conversation_id)
        if conv is None or not conv.constraint:
            return
        stored = replace(spec_from_dict(conv.constraint), options=self.schema_options)
        if self._constraints.get(conversation_id) == stored:
            return
        check = self.bridge.check_constraint

        def done(checked: Checked | None, error: BaseException | None) -> None:
            current = self.store.conversation(conversation_id)
            if checked is None or current is None or not current.constraint:
                return
            if replace(spec_from_dict(current.constraint), options=self.schema_options) != stored:
                return  # replaced meanwhile
            if checked.ok and checked.spec is not None:
                self._constraints[conversation_id] = checked.spec
                self.changed.emit(conversation_id)  # the chip names the tight defaults
            else:
                problems = "; ".join(str(d) for d in checked.errors)
                name = stored.name or "The constraint"
                self.problem.emit(conversation_id, f"{name} no longer checks: {problems}")

        run_task(lambda: check_spec(stored, check), done)

    def _check_tools(self, conversation_id: int) -> None:
        """Find, off the GUI thread, what Corral cannot enforce of the conversation's tools."""
        conv = self.store.conversation(conversation_id)
        if conv is None or not enabled_tool_definitions(conv.tools):
            self._tool_warnings.pop(conversation_id, None)
            return
        config = conv.tools

        def done(warnings: list[str] | None, error: BaseException | None) -> None:
            current = self.store.conversation(conversation_id)
            if current is None or current.tools != config:
                return  # changed meanwhile
            found = list(warnings or []) + ([str(error)] if error is not None else [])
            self._tool_warnings[conversation_id] = tuple(found)
            self.changed.emit(conversation_id)

        run_task(lambda: enabled_tool_warnings(config), done)
