"""arbiter.paths: the private files that hold tokens and the memory."""

from __future__ import annotations

import os
import stat

import pytest

from arbiter import paths


@pytest.fixture
def common_umask():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_private_file_is_0600_and_empty_before_a_byte_is_written_even_one_already_there(tmp_path, common_umask):
    there = tmp_path / "there.partial"
    there.write_text("an interrupted export")
    there.chmod(0o644)
    for path in (there, tmp_path / "new"):
        fd = paths.private_fd(path, os.O_RDWR)
        try:
            assert (stat.S_IMODE(os.fstat(fd).st_mode), os.fstat(fd).st_size) == (0o600, 0)
        finally:
            os.close(fd)


def test_a_secret_written_over_a_readable_file_is_its_owners_alone(tmp_path, common_umask):
    token = tmp_path / "tokens" / "alice.token"
    token.parent.mkdir()
    token.write_text("old")
    token.chmod(0o644)
    paths.write_secret(token, "arb_new")
    assert token.read_text() == "arb_new\n" and stat.S_IMODE(token.stat().st_mode) == 0o600


def test_a_symlink_where_a_secret_goes_is_replaced_and_its_target_untouched(tmp_path, common_umask):
    # A link planted at a token's path must not send the token (and a chmod) to the link's target; nor may it
    # fail the write: the daemon has already rotated the token, and this file is its only copy.
    target = tmp_path / "elsewhere"
    target.write_text("someone else's file")
    target.chmod(0o644)
    token = tmp_path / "alice.token"
    token.symlink_to(target)
    paths.write_secret(token, "arb_new")
    assert target.read_text() == "someone else's file" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert not token.is_symlink() and token.read_text() == "arb_new\n"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600 and sorted(p.name for p in tmp_path.iterdir()) == [
        "alice.token", "elsewhere"]


def test_a_secret_that_cannot_be_written_leaves_the_old_one_and_no_litter(tmp_path):
    token = tmp_path / "alice.token"
    token.write_text("arb_old\n")
    with pytest.raises(UnicodeEncodeError):
        paths.write_secret(token, "arb_\udc80")  # a lone surrogate: not UTF-8
    assert token.read_text() == "arb_old\n" and [p.name for p in tmp_path.iterdir()] == ["alice.token"]


def test_a_secret_is_on_disk_before_its_name_and_its_name_after_the_folder_sync(tmp_path, syncs):
    """A power cut after write_secret returns must find the new token under its name, not an empty or old file."""
    done = syncs
    token = tmp_path / "t" / "default.token"
    paths.write_secret(token, "new")
    assert [kind for kind, _ in done] == ["file", "rename", "folder"]
    assert done[1:] == [("rename", str(token)), ("folder", str(token.parent))]
    assert token.read_text() == "new\n"
