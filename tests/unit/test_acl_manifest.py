"""ACL manifests are read strictly: a typo or an empty list must never leave restricted files open."""

import pytest

from assistant.auth.acl_manifest import AclManifest
from assistant.core.errors import InvalidRequestError


def test_rules_apply_last_match_wins_and_a_single_entry_is_one_principal():
    manifest = AclManifest.from_dict({
        "default": "group:staff",
        "rules": [
            {"path": "finance/**", "allow": ["group:finance"]},
            {"path": "finance/public/*", "allow": "everyone"},
        ],
    })
    assert manifest.acl_for("handbook.md") == ["group:staff"]
    assert manifest.acl_for("finance/q3/report.pdf") == ["group:finance"]
    assert manifest.acl_for("finance/public/prices.md") == ["everyone"]
    assert AclManifest.from_dict({"rules": []}).acl_for("x") == ["everyone"]  # default named nowhere


@pytest.mark.parametrize(
    "data, words",
    [
        (None, "empty"),
        ({}, "empty"),
        ({"default": []}, "'default' is empty"),
        ({"defaults": ["group:finance"]}, "unknown key(s) defaults"),
        ({"default": ["group:hr"], "rule": [{"path": "x", "allow": ["group:hr"]}]}, "unknown key(s) rule"),
        ({"rules": [{"path": "a/**", "allow": []}]}, "'allow' is empty"),
        ({"rules": [{"path": "a/**", "allow": ["group:hr"], "deny": ["everyone"]}]}, "unknown key(s) deny"),
        ({"rules": [{"allow": ["group:hr"]}]}, "needs 'path' and 'allow'"),
        ({"rules": {"path": "a", "allow": ["group:hr"]}}, "'rules' must be a list"),
        ({"default": ["finance"]}, "not 'everyone'"),
        ({"default": [["group:hr"]]}, "must be a list of principals"),
        # The CLI's reader without --as is `anonymous`: naming it would open the files to every such reader.
        ({"default": ["user:anonymous"]}, "reserved name"),
        ({"rules": [{"path": "a", "allow": ["group:Everyone"]}]}, "reserved name"),
        (["everyone"], "expected a mapping"),
    ],
)
def test_bad_manifests_are_refused_naming_the_problem(data, words):
    with pytest.raises(InvalidRequestError) as info:
        AclManifest.from_dict(data, origin="acl.yaml")
    assert "acl.yaml" in info.value.message and words in info.value.message


def test_an_empty_manifest_file_is_refused(tmp_path):
    path = tmp_path / "acl.yaml"
    path.write_text("# nothing yet\n")
    with pytest.raises(InvalidRequestError, match="is empty"):
        AclManifest.load(path)


def test_a_plain_folder_path_covers_everything_under_it_and_dot_slash_is_ignored():
    manifest = AclManifest.from_dict({"rules": [
        {"path": "finance", "allow": ["group:finance"]},
        {"path": "./legal/**", "allow": ["group:legal"]},
        {"path": "hr/salaries.xlsx", "allow": ["group:hr"]},
    ]})
    assert manifest.acl_for("finance/q3/report.pdf") == ["group:finance"]
    assert manifest.acl_for("finance") == ["group:finance"]
    assert manifest.acl_for("finance-public/menu.md") == ["everyone"]
    assert manifest.acl_for("legal/nda.docx") == ["group:legal"]
    assert manifest.acl_for("hr/salaries.xlsx") == ["group:hr"]
    assert manifest.unmatched(["finance/a.md", "hr/salaries.xlsx"]) == ["legal/**"]


def test_globstar_also_matches_zero_folders():
    manifest = AclManifest.from_dict({"rules": [
        {"path": "Secret Stuff/**/*.md", "allow": ["group:legal"]},
        {"path": "**/payroll/**", "allow": ["group:hr"]},
    ]})
    # `dir/**/*.md` covers the files directly in `dir` too, as in bash's globstar and gitignore.
    assert manifest.acl_for("Secret Stuff/Falcon merger plan.md") == ["group:legal"]
    assert manifest.acl_for("Secret Stuff/archive/osprey.md") == ["group:legal"]
    assert manifest.acl_for("Secret Stuff/notes.txt") == ["everyone"]
    assert manifest.acl_for("payroll/2026.xlsx") == ["group:hr"]
    assert manifest.acl_for("hr/payroll/2026.xlsx") == ["group:hr"]
    assert manifest.acl_for("hr/holidays.md") == ["everyone"]


def test_a_path_with_glob_characters_matches_its_literal_file_or_folder():
    manifest = AclManifest.from_dict({"rules": [{"path": "HR [confidential]", "allow": ["group:hr"]}]})
    assert manifest.acl_for("HR [confidential]/salaries.xlsx") == ["group:hr"]
    assert manifest.acl_for("HR c/salaries.xlsx") == ["everyone"]
    assert manifest.unmatched(["HR [confidential]/salaries.xlsx"]) == []


def test_a_manifest_that_is_not_utf8_is_refused_naming_the_byte(tmp_path):
    path = tmp_path / "acl.yaml"
    path.write_bytes("default: [group:财务]\n".encode("gbk"))
    with pytest.raises(InvalidRequestError, match="not UTF-8 text"):
        AclManifest.load(path)


def test_the_cli_reader_without_as_reads_only_what_everyone_may():
    from assistant.core.principals import ANONYMOUS, Principal

    assert ANONYMOUS.acl_tokens == ["everyone"]
    assert Principal(name="ana", groups=frozenset({"hr"})).acl_tokens == ["everyone", "group:hr", "user:ana"]
