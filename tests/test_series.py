"""A patch series as it is posted, without compiling: a directory of v1-0001-… files or an mbox
read into its patches in order (cover letters and replies left out, of several versions the
newest whole), the
plan's `series` and `prefixes`, a series built in order as one build by a stand-in tree, and a
series that does not apply refused in one line naming the patch, the file and the hunk, before
any build starts and with nothing left in the cache.

The same against PostgreSQL's own source: test_series_real.py."""

from __future__ import annotations

import mailbox
from dataclasses import replace
from email.message import EmailMessage
from pathlib import Path

import pytest

from pgbenchlab import builds, plan
from pgbenchlab.builds import cache
from pgbenchlab.builds.builder import patch_files
from pgbenchlab.builds.series import failed_hunk, read_series
from pgbenchlab.cli import build_parser, main
from pgbenchlab.errors import BuildError, PlanError, UserError
from pgbenchlab.studies import StudyOptions, render
from test_builds import assert_nothing_built, build_cache, refused, scripted_tree
from test_studies import LAPTOP, git_repo, parsed

__all__ = ["build_cache"]  # the fixture: each test its own build cache

LINES = "".join(f"line {n}\n" for n in range(1, 21))
# Three patches of one file, each over the one before: the second needs the first.
DIFFS = (
    "--- a/src/guc.c\n+++ b/src/guc.c\n@@ -1,3 +1,3 @@\n line 1\n-line 2\n+line 2 (p1)\n line 3\n",
    "--- a/src/guc.c\n+++ b/src/guc.c\n@@ -1,3 +1,3 @@\n line 1\n-line 2 (p1)\n"
    "+line 2 (p1, p2)\n line 3\n@@ -14,3 +14,3 @@\n line 14\n-line 15\n+line 15 (p2)\n line 16\n",
    "--- a/src/guc.c\n+++ b/src/guc.c\n@@ -18,3 +18,3 @@\n line 18\n-line 19\n+line 19 (p3)\n"
    " line 20\n",
)
SUBJECTS = ("Rename line two", "Rename it again, and line 15", "Rename line 19")


def posted(number: int, diff: str, *, total: int = 3, version: int = 1, subject: str = "") -> str:
    """One patch as `git format-patch` writes it (a message of its own)."""
    subject = subject or SUBJECTS[number - 1]
    return (
        f"From {'0' * 40} Mon Sep 17 00:00:00 2001\nFrom: A Hacker <hacker@example.org>\n"
        f"Date: Fri, 27 Nov 2026 10:00:00 +0000\n"
        f"Subject: [PATCH v{version} {number}/{total}] {subject}\n\n{subject}.\n---\n"
        f"{diff}-- \n2.39.5\n\n"
    )


def series_dir(path: Path, diffs: tuple[str, ...] = DIFFS, version: int = 1) -> Path:
    """The series as `git format-patch -v1 --cover-letter` writes it into a directory."""
    path.mkdir(parents=True)
    (path / f"v{version}-0000-cover-letter.patch").write_text("From x\nSubject: [PATCH 0/3]\n")
    for number, diff in enumerate(diffs, start=1):
        name = f"v{version}-{number:04d}-{SUBJECTS[number - 1].split(',')[0].replace(' ', '-')}"
        (path / f"{name}.patch").write_text(posted(number, diff, total=len(diffs)))
    return path


def write_mbox(path: Path, *messages: str) -> Path:
    path.write_text("".join(messages))
    return path


def tree_with_lines(path: Path) -> Path:
    """A stand-in source tree (`scripted_tree`) whose install keeps src/guc.c as patched."""
    tree = scripted_tree(path)
    (tree / "src" / "guc.c").write_text(LINES)
    makefile = (tree / "Makefile").read_text()
    keep = "\tcp src/guc.c $(DESTDIR)$(PREFIX)/guc.c\n"
    (tree / "Makefile").write_text(makefile.rstrip("\n") + "\n" + keep)
    return tree


def test_a_directory_series_is_its_numbered_files_in_order(tmp_path: Path) -> None:
    folder = series_dir(tmp_path / "v1")
    (folder / "notes.txt").write_text("not a patch")
    found = read_series(folder)
    assert [p.name for p in found] == [
        "v1-0001-Rename-line-two.patch",
        "v1-0002-Rename-it-again.patch",
        "v1-0003-Rename-line-19.patch",
    ]  # the cover letter (0000) and other files left out
    assert [p.number for p in found] == [1, 2, 3] and {p.version for p in found} == {1}


def test_an_mbox_is_its_messages_with_a_diff_in_the_numbers_order(tmp_path: Path) -> None:
    cover = posted(0, "", subject="Two renames").replace("\n---\n", "\n")
    reply = posted(1, "> diff --git a/x b/x\n> +quoted, not a patch\n", subject="Re: renames")
    box = write_mbox(tmp_path / "thread.mbox", cover, posted(2, DIFFS[1], total=2), reply,
                     posted(1, DIFFS[0], total=2))  # fmt: skip
    found = read_series(box)
    assert [p.name for p in found] == [
        "[PATCH v1 1/2] Rename line two",
        "[PATCH v1 2/2] Rename it again, and line 15",
    ]
    assert DIFFS[0].encode() in found[0].text and DIFFS[1].encode() in found[1].text


def test_patches_attached_to_one_message_are_each_a_patch(tmp_path: Path) -> None:
    """As patches are posted to pgsql-hackers: attachments, here base64-encoded."""
    message = EmailMessage()
    message["From"], message["Subject"] = "hacker@example.org", "Re: renames, v2"
    message.set_content("v2 attached: rebased.\n")
    for number in (2, 1):  # attached out of order: their names give the order
        name = f"v2-{number:04d}-step.patch"
        message.add_attachment(DIFFS[number - 1].encode(), "text", "x-patch", filename=name)
    path = tmp_path / "v2.mbox"
    box = mailbox.mbox(path)
    box.add(message)
    box.close()
    found = read_series(path)
    assert [p.name for p in found] == ["v2-0001-step.patch", "v2-0002-step.patch"]
    assert [p.text.decode() for p in found] == list(DIFFS[:2])


def test_a_thread_of_several_versions_is_its_newest_whole(tmp_path: Path) -> None:
    """A thread saved whole: v1 (unversioned, two patches), a review, v2 (three patches), a
    reply; and a directory holding v1's and v2's files: each is v2, in its numbers' order."""
    reply = posted(1, "> diff --git a/x b/x\n", subject="Re: renames")
    v1 = [posted(n, DIFFS[n - 1], total=2).replace("[PATCH v1 ", "[PATCH ") for n in (1, 2)]
    v2 = [posted(n, DIFFS[n - 1], version=2) for n in (3, 1, 2)]
    box = write_mbox(tmp_path / "thread.mbox", *v1, reply, *v2, reply)
    found = read_series(box)
    assert [(p.version, p.number) for p in found] == [(2, 1), (2, 2), (2, 3)]
    assert found[0].name == "[PATCH v2 1/3] Rename line two"
    folder = series_dir(tmp_path / "both", DIFFS[:2], version=1)
    for number, diff in enumerate(DIFFS, start=1):
        (folder / f"v2-{number:04d}-step.patch").write_text(posted(number, diff, version=2))
    assert [p.name for p in read_series(folder)] == [f"v2-000{n}-step.patch" for n in (1, 2, 3)]
    unnumbered = write_mbox(tmp_path / "u.mbox", *v1, posted(1, DIFFS[0], version=2).replace(
        "[PATCH v2 1/3]", "[PATCH v2]"))  # fmt: skip
    with pytest.raises(BuildError, match="its newest, v2, has an unnumbered patch: give every"):
        read_series(unnumbered)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("versions", "holds versions v1, v2; its newest, v2, lacks patch 1 of 2: give every"),
        ("unnumbered", "fix.patch has no number; name the files as git format-patch does"),
        ("empty", "no patch in it"),
        ("plain", 'not an mbox (it does not begin with a "From " line)'),
        ("twice", "two patches numbered 1 ([PATCH v1 1/2] a and [PATCH v1 1/2] b)"),
    ],
)
def test_a_series_that_cannot_apply_as_one_is_refused(
    case: str, expected: str, tmp_path: Path
) -> None:
    path = tmp_path / "series"
    if case == "versions":
        series_dir(path, DIFFS[:1], version=1)
        (path / "v2-0002-next.patch").write_text(posted(2, DIFFS[1], version=2))
    elif case == "unnumbered":
        series_dir(path)
        (path / "fix.patch").write_text(DIFFS[0])
    elif case == "empty":
        path.mkdir()
    elif case == "plain":
        path.write_text(DIFFS[0])
    else:
        write_mbox(path, posted(1, DIFFS[0], total=2, subject="a"),
                   posted(1, DIFFS[1], total=2, subject="b"))  # fmt: skip
    with pytest.raises(BuildError) as refusal:
        read_series(path)
    assert expected in str(refusal.value) and "\n" not in str(refusal.value)


def test_the_failed_hunk_is_found_from_gits_line() -> None:
    # In a hunk, a removed "-- a/comment" and an added "++ b/added" (SQL) read as file lines.
    sql = (
        "--- a/x.sql\n+++ b/x.sql\n@@ -1,2 +1,2 @@\n--- a/comment\n+++ b/added\n select;\n"
        "@@ -10,1 +10,1 @@\n-old\n+new\n"
    )
    text = sql + DIFFS[1]
    assert failed_hunk(text, "patch failed: x.sql:10") == " (hunk #2 of x.sql: @@ -10,1 +10,1 @@)"
    said = failed_hunk(text, "patch failed: src/guc.c:14")
    assert said == " (hunk #2 of src/guc.c: @@ -14,3 +14,3 @@)"
    assert failed_hunk(text, "patch failed: src/guc.c:1").startswith(" (hunk #1 of src/guc.c")
    assert failed_hunk(text, "src/nope.c: No such file or directory") == ""
    assert failed_hunk(text, "patch failed: added:1") == ""


def plan_of(tmp_path: Path, build: str, servers: str = "") -> plan.Plan:
    tree = tmp_path / "tree"
    if not tree.exists():
        tree_with_lines(tree)
    text = f'[build.base]\nsource = "dir:{tree}"\n{build}\n[[server]]\nname = "base"\n'
    text += 'install = { build = "base" }\n' + servers
    (tmp_path / "plan.toml").write_text(text)
    return plan.parse(text, "plan.toml", base=tmp_path)


def server(name: str) -> str:
    return f'[[server]]\nname = "{name}"\ninstall = {{ build = "{name}" }}\n'


def test_series_and_prefixes_in_the_plan(tmp_path: Path) -> None:
    write_mbox(tmp_path / "thread.mbox", *(posted(n, d) for n, d in enumerate(DIFFS, start=1)))
    series_dir(tmp_path / "v1")
    build = (
        '[build.mbox]\nfrom = "base"\nseries = "thread.mbox"\nprefixes = true\n'
        '[build.files]\nfrom = "base"\nseries = "v1"\n'
    )
    the_plan = plan_of(tmp_path, build, server("mbox-p2") + server("files"))
    found = {b.name: b for b in the_plan.builds}
    assert list(found) == ["base", "mbox-p1", "mbox-p2", "mbox", "files"]
    assert found["mbox"].patches == (str(tmp_path / "thread.mbox"),)
    assert [Path(p).name for p in found["files"].patches] == [
        p.name for p in read_series(tmp_path / "v1")
    ]  # each file a patch, in their numbers' order
    assert [p.name for p in patch_files(found["mbox-p2"])] == [
        f"[PATCH v1 {n}/3] {s}" for n, s in enumerate(SUBJECTS[:2], start=1)
    ]
    assert [p.content for p in patch_files(found["mbox"])] == [
        p.text for p in read_series(tmp_path / "thread.mbox")
    ]
    assert [b.name for b in the_plan.needed_builds] == ["base", "mbox-p2", "files"]
    before = the_plan.digest
    (tmp_path / "thread.mbox").write_text((tmp_path / "thread.mbox").read_text() + "\n")
    again = plan_of(tmp_path, build, server("mbox-p2") + server("files"))
    assert again.digest != before, "an edited mbox is a changed plan"


@pytest.mark.parametrize(
    ("build", "key", "expected"),
    [
        ('series = "one.mbox"\nprefixes = true', "prefixes", "adds 1 patch(es); prefixes need 2"),
        ('series = "v1"\nprefixes = true\n[build.s-p1]\nfrom = "base"', "prefixes",
         "the prefix build s-p1 is also a [build.s-p1]; rename one"),
        ('series = "v1"\nprefixes = "yes"', "prefixes", "must be true or false"),
        ('series = "nowhere"', "series", "no such file or directory"),
        ('series = ["v1"]', "series", "must be an mbox file or a directory of patches"),
    ],
)  # fmt: skip
def test_series_mistakes_are_plan_errors(
    build: str, key: str, expected: str, tmp_path: Path
) -> None:
    write_mbox(tmp_path / "one.mbox", posted(1, DIFFS[0], total=1))
    series_dir(tmp_path / "v1")
    with pytest.raises(PlanError) as refusal:
        plan_of(tmp_path, f'[build.s]\nfrom = "base"\n{build}\n')
    assert f"build.s.{key}" in str(refusal.value) and expected in str(refusal.value)


def test_a_series_is_one_build_and_each_prefix_another(tmp_path: Path, build_cache: Path) -> None:
    write_mbox(tmp_path / "thread.mbox", *(posted(n, d) for n, d in enumerate(DIFFS, start=1)))
    build = '[build.s]\nfrom = "base"\nseries = "thread.mbox"\nprefixes = true\n'
    the_plan = plan_of(tmp_path, build, server("s-p1") + server("s-p2") + server("s"))
    made = {i.build: i for i in builds.ensure_all(the_plan.needed_builds)}
    kept = {name: (i.bin_dir.parent / "guc.c").read_text() for name, i in made.items()}
    assert "line 2 (p1)\n" in kept["s-p1"] and "(p2)" not in kept["s-p1"]
    assert "line 2 (p1, p2)\n" in kept["s-p2"] and "line 15 (p2)\n" in kept["s-p2"]
    assert "(p3)" not in kept["s-p2"] and "line 19 (p3)\n" in kept["s"]
    facts = builds.provenance_of(made["s"])
    assert facts is not None and [p["name"] for p in facts["patches"]] == [
        f"[PATCH v1 {n}/3] {s}" for n, s in enumerate(SUBJECTS, start=1)
    ]
    assert len({i.bin_dir for i in made.values()}) == 4, "four builds, four cache entries"


def test_a_series_that_does_not_apply_is_refused_before_any_build(
    tmp_path: Path, build_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The base (not cached) would build first: the series is tried before it, and the line
    names the second patch, its file and its hunk; nothing is built or left in the cache."""
    broken = DIFFS[1].replace("-line 15\n", "-line fifteen\n")
    series_dir(tmp_path / "v1", (DIFFS[0], broken, DIFFS[2]))
    plan_of(tmp_path, '[build.s]\nfrom = "base"\nseries = "v1"\n', server("s"))
    assert main(["build", "-q", str(tmp_path / "plan.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "pgbenchlab: error: patch v1-0002-Rename-it-again.patch (2 of 3) does not apply: patch "
        "failed: src/guc.c:14 (hunk #2 of src/guc.c: @@ -14,3 +14,3 @@)"
    )
    assert_nothing_built(build_cache)
    assert not (build_cache / "builds").exists() or not any((build_cache / "builds").iterdir())


def test_a_refused_mbox_patch_is_named_by_its_subject(
    tmp_path: Path, build_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tree_with_lines(tmp_path / "tree")
    swapped = (posted(1, DIFFS[1], total=2, subject=SUBJECTS[1]),
               posted(2, DIFFS[0], total=2, subject=SUBJECTS[0]))  # fmt: skip
    write_mbox(tmp_path / "t.mbox", *swapped)
    err = refused(tmp_path, f'[build.b]\nsource = "dir:{tree}"\nseries = "t.mbox"', capsys)
    assert err.startswith(
        'pgbenchlab: error: patch "[PATCH v1 1/2] Rename it again, and line 15" (1 of 2 in '
        "t.mbox) does not apply: patch failed: src/guc.c:1 (hunk #1 of src/guc.c"
    ), err
    assert_nothing_built(build_cache)
    assert cache.cached_builds(build_cache) == []


def test_new_patch_takes_a_series_and_its_prefixes(tmp_path: Path) -> None:
    source = f"git:{git_repo(tmp_path / 'pg')}"
    write_mbox(tmp_path / "thread.mbox", *(posted(n, d) for n, d in enumerate(DIFFS, start=1)))
    series_dir(tmp_path / "v1")
    given = StudyOptions(
        source=source,
        base="master",
        series=(tmp_path / "thread.mbox", tmp_path / "v1"),
        prefixes=True,
    )
    the_plan = parsed(render("patch", LAPTOP, given), tmp_path, LAPTOP.cpus)
    assert [s.name for s in the_plan.servers] == [
        "base", "thread-p1", "thread-p2", "thread", "v1-p1", "v1-p2", "v1",
    ]  # fmt: skip
    assert [len(patch_files(b)) for b in the_plan.needed_builds] == [0, 1, 2, 3, 1, 2, 3]
    assert the_plan.description == (
        "a series of 3 patch(es), a series of 3 patch(es) against master"
    )
    argv = f"new patch --source {source} --base master --series thread.mbox --series v1 --prefixes"
    args = build_parser().parse_args(argv.split())
    assert args.options_from(args).study_options == replace(
        given, series=(Path("thread.mbox"), Path("v1"))
    )
    alone = StudyOptions(source=source, base="master", prefixes=True, patches=(tmp_path / "x",))
    with pytest.raises(UserError, match="--prefixes belongs to --series"):
        render("patch", LAPTOP, alone)
