"""Each setting's flat `ASSISTANT_*` name, declared once at its field, and the readers of those names.

A value lives in a section (`settings.finetune.lora_rank`) while its variable keeps the flat name it
always had (`ASSISTANT_FINETUNE_LORA_RANK`): the section's `flat_prefix` (a class keyword,
`class FinetuneSettings(Section, flat_prefix="finetune_")`) and the field's name, unless the field
declares its flat name as `validation_alias` (reranking's `mode` is `reranker`). An alias in capitals
is the variable itself, read without `ASSISTANT_` (prometheus-client's `PROMETHEUS_MULTIPROC_DIR`).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from functools import cache
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic_settings import BaseSettings, DotEnvSettingsSource, EnvSettingsSource, SettingsConfigDict

ENV_PREFIX = "ASSISTANT_"
# `ASSISTANT_*` variables that are not settings: compose.yaml's image tag (read from the same `.env`).
NOT_SETTINGS = frozenset({"ASSISTANT_IMAGE"})


class Section(BaseModel):
    """One section of `Settings`; a field is validated by its own name or its flat name."""

    model_config = ConfigDict(validate_by_name=True)
    flat_prefix: ClassVar[str] = ""

    def __init_subclass__(cls, flat_prefix: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.flat_prefix = flat_prefix

    @classmethod
    def flat_name(cls, field: str) -> str:
        """The flat name of `field`, e.g. "lora_rank" of the finetune section -> "finetune_lora_rank"."""
        alias = cls.model_fields[field].validation_alias
        return alias.lower() if isinstance(alias, str) else cls.flat_prefix + field

    @classmethod
    def env_name(cls, field: str) -> str:
        """The variable of `field`, e.g. `ASSISTANT_FINETUNE_LORA_RANK`, `PROMETHEUS_MULTIPROC_DIR`."""
        alias = cls.model_fields[field].validation_alias
        return alias if isinstance(alias, str) and alias.isupper() else ENV_PREFIX + cls.flat_name(field).upper()


def section_model(settings_cls: type[BaseModel], section: str) -> type[Section]:
    """The `Section` model of field `section` of `settings_cls`, e.g. `RetrievalSettings` for "retrieval".

    Raises:
        KeyError: `settings_cls` has no such field. TypeError: the field is not a `Section`.
    """
    model = settings_cls.model_fields[section].annotation
    if not (isinstance(model, type) and issubclass(model, Section)):
        raise TypeError(f"{settings_cls.__name__}.{section} is not a settings section")
    return model


@cache
def env_fields(settings_cls: type[BaseModel]) -> dict[str, tuple[str, str]]:
    """Flat name -> (section, field) of every field of the sections of `settings_cls`.

    Raises:
        RuntimeError: two fields have one flat name, or a flat name is a section's.
    """
    table: dict[str, tuple[str, str]] = {}
    for section in settings_cls.model_fields:
        model = section_model(settings_cls, section)
        for field in model.model_fields:
            flat = model.flat_name(field)
            if flat in table or flat in settings_cls.model_fields:
                raise RuntimeError(f"the flat setting name {flat!r} of {section}.{field} is declared twice")
            table[flat] = (section, field)
    return table


@cache
def _unprefixed(settings_cls: type[BaseModel]) -> dict[str, str]:
    # variable read without the prefix -> its flat name
    return {env: flat for flat, (section, field) in env_fields(settings_cls).items()
            if not (env := section_model(settings_cls, section).env_name(field)).startswith(ENV_PREFIX)}


def env_name_at(settings_cls: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """The variable of a validation error's location, e.g. ("retrieval", "top_k") -> `ASSISTANT_TOP_K`;
    outside the sections `ASSISTANT_<FIRST PART>`; "" for an empty location."""
    if not loc:
        return ""
    if str(loc[0]) in settings_cls.model_fields and len(loc) > 1:
        section = section_model(settings_cls, str(loc[0]))
        if str(loc[1]) in section.model_fields:
            return section.env_name(str(loc[1]))
    return str(loc[0]) if str(loc[0]) in _unprefixed(settings_cls) else ENV_PREFIX + str(loc[0]).upper()


def env_name_of_field(model_name: str | None, field: str) -> str:
    """The variable of `field` in the section model named `model_name` (a validator's
    `info.config["title"]`: "OidcSettings", "issuer_url" -> `ASSISTANT_OIDC_ISSUER_URL`)."""
    section = next((cls for cls in Section.__subclasses__() if cls.__name__ == model_name), None)
    return section.env_name(field) if section and field in section.model_fields else ENV_PREFIX + field.upper()


def nest_flat_names(settings_cls: type[BaseModel], values: dict[str, Any]) -> dict[str, Any]:
    """`values` with every flat name (`top_k`, `PROMETHEUS_MULTIPROC_DIR`) moved into its section
    (`{"retrieval": {"top_k": ...}}`), other keys kept. A section given whole (a mapping or a
    section model) takes the flat values on top of its own."""
    table, unprefixed = env_fields(settings_cls), _unprefixed(settings_cls)
    nested = {key: value for key, value in values.items() if unprefixed.get(key, key) not in table}
    for key, value in values.items():
        if unprefixed.get(key, key) in table:
            section, field = table[unprefixed.get(key, key)]
            given = nested.get(section) or {}
            if isinstance(given, BaseModel):
                given = {name: getattr(given, name) for name in given.model_fields_set}
            nested[section] = {**given, field: value}
    return nested


class _FlatNames(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore")


@cache
def _flat_names_model(settings_cls: type[BaseModel]) -> type[BaseSettings]:
    # One optional field per flat name, typed as its section field (so that JSON lists and maps are
    # decoded); read by pydantic-settings' own sources, never validated.
    env = {flat: env for env, flat in _unprefixed(settings_cls).items()}
    fields: dict[str, Any] = {flat: (section_model(settings_cls, section).model_fields[field].annotation,
                     Field(default=None, validation_alias=env.get(flat)))
              for flat, (section, field) in env_fields(settings_cls).items()}
    return create_model("FlatSettingNames", __base__=_FlatNames, **fields)


def flat_env_source(settings_cls: type[BaseModel], source: EnvSettingsSource) -> EnvSettingsSource:
    """`source` (the environment or a `.env` file, as configured for `settings_cls`) reading the flat
    names (`ASSISTANT_TOP_K`, not `ASSISTANT_RETRIEVAL__TOP_K`), to be nested by `nest_flat_names`."""
    options: dict[str, Any] = dict(
        case_sensitive=source.case_sensitive, env_prefix=source.env_prefix, env_ignore_empty=source.env_ignore_empty,
        env_parse_none_str=source.env_parse_none_str, env_parse_enums=source.env_parse_enums,
    )
    flat = _flat_names_model(settings_cls)
    if isinstance(source, DotEnvSettingsSource):
        return DotEnvSettingsSource(flat, env_file=source.env_file, env_file_encoding=source.env_file_encoding, **options)
    return EnvSettingsSource(flat, **options)


def unknown_env_names(settings_cls: type[BaseModel], names: Iterable[str]) -> list[str]:
    """A sentence for each `ASSISTANT_*` name of `names` (any case, as the settings read them) that is no
    setting's variable nor in `NOT_SETTINGS`, naming the closest variable (`difflib`), e.g.
    "ASSISTANT_TOPK is not a setting and is ignored (did you mean ASSISTANT_TOP_K?)"."""
    known = {section_model(settings_cls, s).env_name(f) for s, f in env_fields(settings_cls).values()}
    sentences = []
    for name in sorted({n.upper() for n in names if n.upper().startswith(ENV_PREFIX)} - known - NOT_SETTINGS):
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        sentences.append(f"{name} is not a setting and is ignored" + (f" (did you mean {close[0]}?)" if close else ""))
    return sentences
