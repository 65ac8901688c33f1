"""Reading a connector manifest (``manifest.yaml``) into a :class:`ConnectorManifest`.

Every problem is reported at its place in the manifest file, so a flow that uses a broken
connector points its author at the manifest, not at the flow.
"""

from __future__ import annotations

import re
from typing import Literal, cast

from procflow.errors import UsageError
from procflow.model.ir import (
    ActionSpec,
    ConfigItem,
    ConnectorManifest,
    EventSpec,
    Schema,
    SchemaField,
    SchemaType,
)
from procflow.model.reading.files import read_text
from procflow.model.reading.reader import Reader
from procflow.model.reading.yamlsrc import YMap, YNode, YScalar, load_yaml
from procflow.model.source import Diagnostics, Pos, suggest

Source = Literal["project", "entrypoint", "builtin"]

SCHEMA_TYPES: tuple[str, ...] = (
    "string",
    "integer",
    "number",
    "boolean",
    "object",
    "array",
    "timestamp",
    "any",
)
TOP_KEYS = ("connector", "description", "config", "actions", "events")
CONFIG_KEYS = ("env", "default", "secret", "required", "description")
ACTION_KEYS = ("description", "args", "result")
EVENT_KEYS = ("description", "payload", "correlate_on")
FIELD_KEYS = ("type", "required", "description")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def load_manifest(
    path: str,
    source: Source,
    diags: Diagnostics,
    *,
    text: str | None = None,
    expected_name: str | None = None,
    directory: str | None = None,
    module: str | None = None,
) -> ConnectorManifest | None:
    """The manifest at ``path`` (or ``text``, reported as ``path``); ``None`` when unusable.

    ``expected_name`` is the name the connector was found under (its folder or entry-point
    name); a manifest that calls itself something else is an error, because flows would call
    it by one name and the runtime import it by the other.
    """
    if text is None:
        try:
            text = read_text(path)
        except (UsageError, UnicodeDecodeError) as exc:
            diags.error(Pos(path, 1, 1, ""), f"cannot read the connector manifest: {exc}")
            return None
    root = load_yaml(text, path, diags)
    if root is None:
        return None
    return _ManifestReader(diags).manifest(root, source, expected_name, directory, module)


class _ManifestReader(Reader):
    def manifest(
        self,
        root: YNode,
        source: Source,
        expected_name: str | None,
        directory: str | None,
        module: str | None,
    ) -> ConnectorManifest | None:
        top = self.map(root, "manifest", "a connector manifest")
        if top is None:
            return None
        self.keys(top, TOP_KEYS, "manifest")
        name_node = self.require(top, "connector", "manifest", "the connector's name")
        name = self.ident(name_node, "manifest", "connector")
        if name is None or name_node is None:
            return None
        if expected_name is not None and name != expected_name:
            self.error(
                name_node.pos,
                "manifest",
                f"connector [{name}] is found as [{expected_name}]; the two names must be equal",
            )
        context = f"connector [{name}]"
        return ConnectorManifest(
            name=name,
            source=source,
            config=self.config(top.get("config"), context),
            actions=self.actions(top.get("actions"), context),
            events=self.events(top.get("events"), context),
            description=self.string(top.get("description"), context, "description"),
            directory=directory,
            module=module,
        )

    # --- sections ---------------------------------------------------------------------------

    def named_maps(self, node: YNode | None, context: str, what: str) -> list[tuple[str, YMap]]:
        """The entries of a ``name: { ... }`` section whose names are identifiers."""
        section = self.map(node, context, what)
        if section is None:
            return []
        out = []
        for key, entry in section.entries.items():
            if self.ident(YScalar(entry.key_pos, key), context, f"a name in {what}") is None:
                continue
            body = self.map(entry.value, f"{context} {what[:-1]} [{key}]", "its declaration")
            if body is not None:
                out.append((key, body))
        return out

    def config(self, node: YNode | None, context: str) -> dict[str, ConfigItem]:
        items = {}
        for name, body in self.named_maps(node, context, "config items"):
            ctx = f"{context} config [{name}]"
            self.keys(body, CONFIG_KEYS, ctx)
            env = self.string(body.get("env"), ctx, "env")
            env_node = body.get("env")
            if env is not None and env_node is not None and not ENV_NAME.match(env):
                self.error(env_node.pos, ctx, f"env [{env}] is not an environment variable name")
            default = self.scalar(body.get("default"), ctx, "default")
            items[name] = ConfigItem(
                name=name,
                env=env,
                default=default,
                secret=bool(self.boolean(body.get("secret"), ctx, "secret")),
                required=bool(self.boolean(body.get("required"), ctx, "required")),
                description=self.string(body.get("description"), ctx, "description"),
            )
        return items

    def actions(self, node: YNode | None, context: str) -> dict[str, ActionSpec]:
        actions = {}
        for name, body in self.named_maps(node, context, "actions"):
            ctx = f"{context} action [{name}]"
            self.keys(body, ACTION_KEYS, ctx)
            result_node = body.get("result")
            actions[name] = ActionSpec(
                name=name,
                args=self.schema(body.get("args"), ctx, "args"),
                # an absent result means "not declared" (paths into it are not checked)
                result=None if result_node is None else self.schema(result_node, ctx, "result"),
                description=self.string(body.get("description"), ctx, "description"),
            )
        return actions

    def events(self, node: YNode | None, context: str) -> dict[str, EventSpec]:
        events = {}
        for name, body in self.named_maps(node, context, "events"):
            ctx = f"{context} event [{name}]"
            self.keys(body, EVENT_KEYS, ctx)
            payload = dict(self.schema(body.get("payload"), ctx, "payload"))
            correlate = self.correlate_on(body.get("correlate_on"), payload, ctx)
            events[name] = EventSpec(
                name=name,
                payload=payload,
                correlate_on=correlate,
                description=self.string(body.get("description"), ctx, "description"),
            )
        return events

    def correlate_on(
        self, node: YNode | None, payload: dict[str, SchemaField], context: str
    ) -> tuple[str, ...]:
        """Checks each key names a payload field; correlated fields become required."""
        keys: list[str] = []
        for text, pos in self.strings(node, context, "correlate_on"):
            head, _, rest = text.partition(".")
            field = payload.get(head)
            if field is None:
                self.error(
                    pos,
                    context,
                    f"correlate_on [{text}] does not name a payload field{suggest(head, payload)}",
                )
                continue
            if rest and field.type not in ("object", "any"):
                self.error(
                    pos,
                    context,
                    f"correlate_on [{text}] is a path into [{head}], which is a {field.type}, "
                    "not an object",
                )
                continue
            if text in keys:
                self.error(pos, context, f"correlate_on lists [{text}] twice")
                continue
            keys.append(text)
            if not field.required:
                # the spec: correlated fields are required in every event of that type
                payload[head] = SchemaField(head, field.type, True, field.description)
        return tuple(keys)

    def schema(self, node: YNode | None, context: str, what: str) -> Schema:
        fields: dict[str, SchemaField] = {}
        for name, body in self.named_maps(node, context, f"{what} fields"):
            ctx = f"{context} {what} [{name}]"
            self.keys(body, FIELD_KEYS, ctx)
            fields[name] = SchemaField(
                name=name,
                # a field with a broken type (reported) stays declared, so flows using it do
                # not get a second, misleading "no such arg" error
                type=self.schema_type(body, ctx) or "any",
                required=bool(self.boolean(body.get("required"), ctx, "required")),
                description=self.string(body.get("description"), ctx, "description"),
            )
        return fields

    def schema_type(self, body: YMap, context: str) -> SchemaType | None:
        node = self.require(body, "type", context, " | ".join(SCHEMA_TYPES))
        text = self.string(node, context, "type")
        if text is None or node is None:
            return None
        if text not in SCHEMA_TYPES:
            self.error(
                node.pos,
                context,
                f"unknown type [{text}]{suggest(text, SCHEMA_TYPES)} "
                f"(one of {', '.join(SCHEMA_TYPES)})",
            )
            return None
        return cast(SchemaType, text)
