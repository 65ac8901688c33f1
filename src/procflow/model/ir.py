"""The intermediate representation both dialects compile into.

Frozen dataclasses only. Every node that a runtime error or a diagram may need to point at keeps
its :class:`Pos`. Expressions are parsed once (``Expr``/``Template``/``ValueTree`` from
:mod:`procflow.expr`) and never re-read from text. Nothing downstream looks at YAML again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from procflow.model.access import Permission as Permission
from procflow.model.access import RecordAction as RecordAction
from procflow.model.access import grants_index
from procflow.model.connector_ir import ActionSpec as ActionSpec
from procflow.model.connector_ir import ConfigItem as ConfigItem
from procflow.model.connector_ir import ConnectorManifest as ConnectorManifest
from procflow.model.connector_ir import EventSpec as EventSpec
from procflow.model.connector_ir import Schema as Schema
from procflow.model.connector_ir import SchemaField as SchemaField
from procflow.model.connector_ir import SchemaType as SchemaType
from procflow.model.notify import Notify as Notify
from procflow.model.notify import Recipient as Recipient
from procflow.model.parallel_ir import JOIN as JOIN
from procflow.model.parallel_ir import ParallelStep as ParallelStep
from procflow.model.schedule import IntentSchedule, Schedule
from procflow.model.source import Pos

if TYPE_CHECKING:  # annotations only: reading the IR needs no expression parser
    from procflow.expr import Expr, Template, ValueTree

END = "end"  # the route literal that ends the path it is on


class _HasName(Protocol):
    @property
    def name(self) -> str: ...


_Named = TypeVar("_Named", bound=_HasName)

# --- shared --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``count`` further attempts (total = count + 1), each due ``every`` after a failure."""

    count: int
    every: timedelta
    pos: Pos

    @property
    def attempts(self) -> int:
        return self.count + 1


# --- intent: data ----------------------------------------------------------------------------

FieldType = Literal[
    "string",
    "text",
    "integer",
    "int",
    "long",
    "decimal",
    "double",
    "boolean",
    "date",
    "timestamp",
    "uuid",
]
RelationKind = Literal["manyToOne", "oneToOne", "oneToMany", "manyToMany"]


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: FieldType
    pos: Pos
    primary_key: bool = False
    generated: bool = False
    required: bool = False
    length: int | None = None
    default: Any = None
    unique: bool = False
    precision: int | None = None
    scale: int | None = None


@dataclass(frozen=True, slots=True)
class Relation:
    name: str
    kind: RelationKind
    to: str
    pos: Pos
    function: str | None = None
    init: int | None = None  # resolved seed id of the initial status
    required: bool = False

    @property
    def to_one(self) -> bool:
        return self.kind in ("manyToOne", "oneToOne")

    @property
    def is_status(self) -> bool:
        return self.to_one and self.function == "EntityStatus"


def by_name(items: Iterable[_Named]) -> dict[str, _Named]:
    """Items by name, the first one of a name winning (as a scan in order would find it): the
    lookups below run for every reference in a file and every value a run writes, so they must
    not scan an entity of 50,000 fields."""
    index: dict[str, _Named] = {}
    for item in items:
        index.setdefault(item.name, item)
    return index


@dataclass(frozen=True, slots=True)
class Entity:
    name: str
    pos: Pos
    fields: tuple[Field, ...]
    relations: tuple[Relation, ...] = ()
    function: str | None = None
    _fields: Mapping[str, Field] = field(init=False, repr=False, compare=False)
    _relations: Mapping[str, Relation] = field(init=False, repr=False, compare=False)
    _key: Field | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_fields", by_name(self.fields))
        object.__setattr__(self, "_relations", by_name(self.relations))
        object.__setattr__(self, "_key", next((f for f in self.fields if f.primary_key), None))

    @property
    def is_setting(self) -> bool:
        return self.function == "Setting"

    @property
    def primary_key(self) -> Field:
        if self._key is None:  # a compiled entity has one: validation requires it
            raise LookupError(f"entity [{self.name}] declares no primary key")
        return self._key

    def field(self, name: str) -> Field | None:
        return self._fields.get(name)

    def relation(self, name: str) -> Relation | None:
        return self._relations.get(name)

    @property
    def status_relation(self) -> Relation | None:
        return next((r for r in self.relations if r.is_status), None)


@dataclass(frozen=True, slots=True)
class Seed:
    name: str
    entity: str
    rows: tuple[Mapping[str, Any], ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class Form:
    name: str
    for_entity: str
    fields: tuple[str, ...]
    actions: tuple[str, ...]
    pos: Pos


# --- intent: processes -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Trigger:
    event: Literal["onCreate", "onUpdate", "onDelete"]
    entity: str
    pos: Pos
    when: tuple[Expr, ...] = ()  # ANDed guards ``field ==|!= literal``
    when_source: tuple[str, ...] = ()
    business_key: str | None = None


@dataclass(frozen=True, slots=True)
class VarDecl:
    name: str
    pos: Pos
    clear_after: str | None = None


@dataclass(frozen=True, slots=True)
class AbortOn:
    statuses: tuple[int, ...]  # resolved seed ids of the status entity
    then: str  # a step name or END
    pos: Pos


@dataclass(frozen=True, slots=True)
class SetField:
    field: str
    value: Any
    is_error: bool = False  # the value is exactly ``{error}``


@dataclass(frozen=True, slots=True)
class SetRelationField:
    relation: str
    value: int  # resolved seed id


@dataclass(frozen=True, slots=True)
class Delegate:
    ref: str  # as written: "SchemaProvisioner" or "custom.SchemaProvisioner"
    module: str  # resolved module inside the project directory: "custom"
    attr: str  # "SchemaProvisioner"
    fields: Mapping[str, Any] = field(default_factory=dict)


IntentAction = SetField | SetRelationField | Notify | Delegate


@dataclass(frozen=True, slots=True)
class ServiceTask:
    """``serviceTask`` or ``script`` (a script has no retry/onError/produces/uses)."""

    name: str
    kind: Literal["serviceTask", "script"]
    action: IntentAction
    pos: Pos
    next: str | None = None
    retry: RetryPolicy | None = None
    on_error: str | None = None
    produces: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Assignee:
    kind: Literal["role", "personal", "path"]
    role: str | None = None  # the role (kind=role) or the fallback role (kind=path)
    path: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TaskTimeout:
    after: timedelta
    then: str


@dataclass(frozen=True, slots=True)
class TaskExpire:
    field: str  # a date or timestamp field of the trigger record, read at task entry
    then: str


@dataclass(frozen=True, slots=True)
class UserTask:
    name: str
    assignee: Assignee
    pos: Pos
    form: str | None = None
    timeout: TaskTimeout | None = None
    expire: TaskExpire | None = None
    on_complete: SetField | SetRelationField | None = None
    next: str | None = None
    kind: Literal["userTask"] = "userTask"


@dataclass(frozen=True, slots=True)
class Decision:
    name: str
    condition: Expr
    source: str
    then: str
    pos: Pos
    else_: str | None = None  # None: false falls through to the next step
    kind: Literal["decision"] = "decision"

    @property
    def next(self) -> str | None:
        return None


@dataclass(frozen=True, slots=True)
class WaitRecord:
    """Parks the path until a record event about the trigger record (itself or ``via``)."""

    name: str
    event: Literal["onCreate", "onUpdate"]
    entity: str
    pos: Pos
    via: str | None = None
    when: Expr | None = None
    when_source: str | None = None
    next: str | None = None
    kind: Literal["wait"] = "wait"


@dataclass(frozen=True, slots=True)
class EndStep:
    name: str
    pos: Pos
    kind: Literal["end"] = "end"

    @property
    def next(self) -> str | None:
        return None


IntentStep = ServiceTask | UserTask | Decision | WaitRecord | EndStep | ParallelStep


@dataclass(frozen=True, slots=True)
class Process:
    name: str
    steps: tuple[IntentStep, ...]
    pos: Pos
    description: str | None = None
    trigger: Trigger | None = None
    vars: tuple[VarDecl, ...] = ()
    abort_on: AbortOn | None = None
    _steps: Mapping[str, IntentStep] = field(init=False, repr=False, compare=False)
    _after: Mapping[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_steps", by_name(self.steps))
        names = [s.name for s in self.steps]
        after: dict[str, str] = {}
        for i, name in enumerate(names):
            after.setdefault(name, names[i + 1] if i + 1 < len(names) else END)
        for fork in self.steps:  # inside a branch, a step no route leaves flows into the join
            if isinstance(fork, ParallelStep):
                after.update((name, JOIN) for members in fork.members for name in members)
        object.__setattr__(self, "_after", after)

    def step(self, name: str) -> IntentStep:
        return self._steps[name]

    def fall_through(self, name: str) -> str:
        """The step after ``name`` in declaration order, or END past the last one."""
        return self._after[name]


@dataclass(frozen=True, slots=True)
class Application:
    """One ``*.intent`` file."""

    name: str
    file: str
    project_dir: str
    pos: Pos
    description: str | None = None
    version: str | None = None
    entities: tuple[Entity, ...] = ()
    seeds: tuple[Seed, ...] = ()
    forms: tuple[Form, ...] = ()
    processes: tuple[Process, ...] = ()
    permissions: tuple[Permission, ...] = ()  # ``write`` expanded into create, update, delete
    schedules: tuple[IntentSchedule, ...] = ()  # its ``schedules:``, in the file's order
    _entities: Mapping[str, Entity] = field(init=False, repr=False, compare=False)
    _forms: Mapping[str, Form] = field(init=False, repr=False, compare=False)
    _grants: Mapping[tuple[str, RecordAction], frozenset[str]] = field(
        init=False, repr=False, compare=False
    )
    _guarded: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_entities", by_name(self.entities))
        object.__setattr__(self, "_forms", by_name(self.forms))
        object.__setattr__(self, "_grants", grants_index(self.permissions))
        object.__setattr__(self, "_guarded", frozenset(p.entity for p in self.permissions))

    def entity(self, name: str) -> Entity | None:
        return self._entities.get(name)

    def form(self, name: str) -> Form | None:
        return self._forms.get(name)

    def guarded_entities(self) -> frozenset[str]:
        """The entities named in any permission (their records follow the permissions)."""
        return self._guarded

    def roles_for(self, entity: str, action: RecordAction) -> frozenset[str]:
        """The roles a permission grants ``action`` on ``entity`` (empty for an entity named in
        no permission: what applies to it then is the runtime's rule)."""
        return self._grants.get((entity, action), frozenset())


# --- flow ------------------------------------------------------------------------------------

InputType = Literal["string", "integer", "number", "boolean", "object", "array", "timestamp"]


@dataclass(frozen=True, slots=True)
class InputDecl:
    name: str
    type: InputType
    pos: Pos
    required: bool = False
    default: Any = None
    has_default: bool = False
    description: str | None = None


@dataclass(frozen=True, slots=True)
class FlowTrigger:
    event: str  # "<connector>.<event>"
    as_: str  # the object input that receives the payload
    pos: Pos
    when: Template | None = None


@dataclass(frozen=True, slots=True)
class Throttle:
    """At most ``limit`` attempts start per ``per`` for each ``key`` value, in the budget
    ``name`` (shared by every step naming it) or the step's own (``flow/step``)."""

    limit: int
    per: timedelta
    name: str
    pos: Pos
    key: Template | None = None
    shared: bool = False  # ``name`` was written (else the step's own budget)


@dataclass(frozen=True, slots=True)
class Concurrency:
    """At most ``limit`` runs of the flow active at once (per ``key`` value)."""

    limit: int
    pos: Pos
    key: Template | None = None
    on_limit: Literal["queue", "refuse"] = "queue"


@dataclass(frozen=True, slots=True)
class Modifiers:
    if_: Template | None = None
    optional: bool = False
    retry: RetryPolicy | None = None  # action and call steps only
    timeout: timedelta | None = None  # action steps: per attempt; call steps: the whole wait
    recover: tuple[FlowStep, ...] | None = None  # group, for_each, repeat only
    description: str | None = None
    throttle: Throttle | None = None  # action and call steps only


@dataclass(frozen=True, slots=True)
class ActionStep:
    id: str
    connector: str
    action: str
    args: Mapping[str, ValueTree]
    pos: Pos
    mods: Modifiers = Modifiers()


@dataclass(frozen=True, slots=True)
class WaitStep:
    """Exactly one of ``for_`` (a duration) and ``until`` (an instant); either may be templated."""

    id: str
    pos: Pos
    for_: Template | None = None
    until: Template | None = None
    mods: Modifiers = Modifiers()


@dataclass(frozen=True, slots=True)
class WaitForStep:
    id: str
    event: str  # "<connector>.<event>"
    match: Mapping[str, Template]
    timeout: timedelta
    pos: Pos
    lookback: timedelta | None = None
    mods: Modifiers = Modifiers()


@dataclass(frozen=True, slots=True)
class RepeatStep:
    id: str
    every: timedelta
    max: int
    until: Template
    steps: tuple[FlowStep, ...]
    pos: Pos
    mods: Modifiers = Modifiers()


@dataclass(frozen=True, slots=True)
class ForEachStep:
    id: str
    items: Template
    steps: tuple[FlowStep, ...]
    pos: Pos
    as_: str = "item"
    mods: Modifiers = Modifiers()


@dataclass(frozen=True, slots=True)
class GroupStep:
    id: str
    steps: tuple[FlowStep, ...]
    pos: Pos
    mods: Modifiers = Modifiers()


@dataclass(frozen=True, slots=True)
class SetStep:
    id: str
    values: Mapping[str, ValueTree]
    pos: Pos
    mods: Modifiers = Modifiers()


@dataclass(frozen=True, slots=True)
class FailStep:
    id: str
    message: Template
    pos: Pos
    mods: Modifiers = Modifiers()


@dataclass(frozen=True, slots=True)
class CallInput:
    """One input a call step hands its child, where it is written; ``literal`` is its plain
    value when it is one (a single ``{{ }}`` is only known at run time: ``checkable`` False)."""

    key_pos: Pos
    value_pos: Pos
    literal: Any = None
    checkable: bool = False


@dataclass(frozen=True, slots=True)
class CallStep:
    """``call: FLOW`` with ``inputs``: a run of another flow, waited for unless ``detach``."""

    id: str
    flow: str
    inputs: Mapping[str, ValueTree]
    pos: Pos
    flow_pos: Pos
    written: Mapping[str, CallInput] = field(default_factory=dict)
    detach: bool = False
    mods: Modifiers = Modifiers()


FlowStep = (
    ActionStep
    | WaitStep
    | WaitForStep
    | RepeatStep
    | ForEachStep
    | GroupStep
    | SetStep
    | FailStep
    | CallStep
)


@dataclass(frozen=True, slots=True)
class Flow:
    """One ``*.flow.yaml`` file."""

    name: str
    steps: tuple[FlowStep, ...]
    file: str
    project_dir: str
    pos: Pos
    description: str | None = None
    version: str | None = None
    trigger: FlowTrigger | None = None  # the event trigger (a list of triggers holds at most one)
    inputs: Mapping[str, InputDecl] = field(default_factory=dict)
    recover: tuple[FlowStep, ...] | None = None
    output: ValueTree | None = None
    connectors: Mapping[str, ConnectorManifest] = field(default_factory=dict)  # those it uses
    schedules: tuple[Schedule, ...] = ()  # its trigger's schedules, in the file's order
    concurrency: Concurrency | None = None


Definition = Process | Flow
