"""The image build locks: a private folder of this user's, no link followed, a timeout.

The folder and the locks are real files in a test folder standing for the temp folder;
another user is a real uid (chown, as root), a planted link a real symbolic link.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from orchestrator.errors import InfrastructureError, LockTimeoutError
from orchestrator.services.image_reuse import build_lock, lock_folder

OTHER_UID = 54321


def _folder(root: Path) -> Path:
    return root / f"orchestrator-locks-{os.geteuid()}"


def test_the_folder_is_made_private_and_the_lock_is_a_file_of_ours(tmp_path):
    with build_lock("abc", root=tmp_path):
        folder = _folder(tmp_path)
        status = os.lstat(folder)
        assert stat.S_ISDIR(status.st_mode)
        assert stat.S_IMODE(status.st_mode) == 0o700
        lock = os.lstat(folder / "image-abc.lock")
        assert stat.S_ISREG(lock.st_mode)
        assert stat.S_IMODE(lock.st_mode) == 0o600
    with build_lock("abc", root=tmp_path):  # released, and taken again
        pass


def test_a_planted_link_for_the_folder_is_refused_and_its_target_never_made(tmp_path):
    target = tmp_path / "elsewhere"
    _folder(tmp_path).symlink_to(target)
    with pytest.raises(InfrastructureError, match="not a folder"), build_lock("abc", root=tmp_path):
        pass
    assert not target.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another user's needs root")
def test_a_folder_of_another_user_is_refused(tmp_path):
    folder = _folder(tmp_path)
    folder.mkdir(mode=0o700)
    os.chown(folder, OTHER_UID, OTHER_UID)
    with pytest.raises(InfrastructureError, match=f"belongs to uid {OTHER_UID}"):
        lock_folder(tmp_path)


def test_a_folder_open_to_others_is_refused(tmp_path):
    folder = _folder(tmp_path)
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(InfrastructureError, match="open to others"):
        lock_folder(tmp_path)


def test_a_link_in_place_of_the_lock_file_is_not_followed(tmp_path):
    folder = lock_folder(tmp_path)
    target = tmp_path / "made-by-root"
    (folder / "image-abc.lock").symlink_to(target)
    with (
        pytest.raises(InfrastructureError, match="cannot be opened as a lock"),
        build_lock("abc", root=tmp_path),
    ):
        pass
    assert not target.exists()


def test_a_lock_held_too_long_is_one_error_line_not_a_hang(tmp_path):
    # The second is another open file description: to flock, another holder, as another
    # process would be.
    with (
        build_lock("abc", root=tmp_path),
        pytest.raises(LockTimeoutError) as raised,
        build_lock("abc", root=tmp_path, timeout_s=0.3),
    ):
        pass
    message = str(raised.value)
    assert "\n" not in message
    assert "'abc' still held after 0.3 s" in message
    with build_lock("abc", root=tmp_path, timeout_s=0.3):  # free again
        pass


def test_other_names_do_not_wait_for_each_other(tmp_path):
    with build_lock("abc", root=tmp_path), build_lock("def", root=tmp_path, timeout_s=0.3):
        pass


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "x" * 65])
def test_a_lock_name_is_a_plain_word(tmp_path, name):
    with pytest.raises(ValueError, match="not a lock name"), build_lock(name, root=tmp_path):
        pass
