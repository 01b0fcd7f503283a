"""Reading the flat `ASSISTANT_*` variables (environment and `.env`) of the nested settings.

pydantic-settings reads one variable per top-level field; the sections are top-level fields, and
their values have flat names (`ASSISTANT_TOP_K`, not `ASSISTANT_RETRIEVAL__TOP_K`). The readers
here are pydantic-settings' own, pointed at a model with one field per flat name (its type taken
from the section field, so JSON lists and maps are decoded as before); `Settings` then moves the
flat names into their sections (`env_names.nest_flat_names`).
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import AliasChoices, BaseModel, Field, create_model
from pydantic_settings import BaseSettings, DotEnvSettingsSource, EnvSettingsSource, SettingsConfigDict

from assistant.core.settings.env_names import ENV_FIELDS, UNPREFIXED_ENV_NAMES


class _FlatNames(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore")


@lru_cache(maxsize=None)
def flat_names_model(settings_cls: type[BaseModel]) -> type[BaseSettings]:
    """A model with one optional field per flat name of `settings_cls`'s sections (read only, never validated)."""
    fields = {}
    for flat, (section, name) in ENV_FIELDS.items():
        section_cls = settings_cls.model_fields[section].annotation
        alias = UNPREFIXED_ENV_NAMES.get(flat)
        fields[flat] = (
            section_cls.model_fields[name].annotation,
            Field(default=None, validation_alias=AliasChoices(alias, flat) if alias else None),
        )
    return create_model("FlatSettingNames", __base__=_FlatNames, **fields)


def flat_env_source(settings_cls: type[BaseModel], source: EnvSettingsSource) -> EnvSettingsSource:
    """`source` (the environment or a `.env` file, as configured for `settings_cls`) reading flat names."""
    options = dict(
        case_sensitive=source.case_sensitive, env_prefix=source.env_prefix, env_ignore_empty=source.env_ignore_empty,
        env_parse_none_str=source.env_parse_none_str, env_parse_enums=source.env_parse_enums,
    )
    flat = flat_names_model(settings_cls)
    if isinstance(source, DotEnvSettingsSource):
        return DotEnvSettingsSource(flat, env_file=source.env_file, env_file_encoding=source.env_file_encoding, **options)
    return EnvSettingsSource(flat, **options)
