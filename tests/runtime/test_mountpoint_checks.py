"""The boot validator checks a Mountpoint for Amazon S3 mount as it checks Lustre: mounted at its path by the
mount-s3 FUSE daemon, with the access the spec asked for (storage.mounts), and answering (storage.s3_answers: statfs
through the daemon under the tool timeout). /proc/mounts lines as the kernel writes them for Mountpoint's session
(its FSName, no subtype: source ``mountpoint-s3``, type ``fuse``)."""

from __future__ import annotations

import pytest

S3 = {"path": "/datasets", "fstype": "fuse", "source": "mountpoint-s3", "required": True, "read_only": True}
LUSTRE = {"path": "/fsx", "fstype": "lustre"}
MOUNTED_RO = ("mountpoint-s3 /datasets fuse ro,nosuid,nodev,noatime,user_id=0,group_id=0,default_permissions,"
              "allow_other 0 0\n")
STATFS_FUSE = 'echo fuseblk\n'


def with_s3(node, line: str = MOUNTED_RO, stat: str = STATFS_FUSE, **s3):
    node.append("/proc/mounts", line)
    node.tool("stat", stat)
    return node.profile(mounts=[LUSTRE, {**S3, **s3}])


def test_a_mounted_read_only_bucket_that_answers_passes_beside_lustre(p5):
    res = p5.run("--level", "standard", profile=with_s3(p5))
    assert res.rc == 0, res.stdout
    assert res.status("storage.mounts") == "pass" and res.status("storage.s3_answers") == "pass"
    assert "/datasets (fuse mountpoint-s3)" in res.check("storage.mounts")["observed"]
    assert "/datasets (fuse from mountpoint-s3, read-only)" in res.check("storage.mounts")["expected"]


def test_a_missing_mount_fails_with_mountpoints_remedy_and_nothing_asks_it_to_answer(p5):
    res = p5.run("--level", "standard", profile=with_s3(p5, line=""))
    assert res.not_passing() == {"storage.mounts": "fail"}
    assert res.status("storage.s3_answers") == "skip"
    check = res.check("storage.mounts")
    assert "/datasets not mounted" in check["observed"]
    assert "journalctl -t mount-s3" in check["remedy"] and "lustre client" not in check["remedy"]


@pytest.mark.parametrize("line, expected", [
    (MOUNTED_RO.replace("fuse ro,", "fuse rw,"), "/datasets is mounted read-write, expected read-only"),
    (MOUNTED_RO.replace("mountpoint-s3 ", "s3fs "), "/datasets is fuse from s3fs, expected mountpoint-s3"),
    ("/dev/nvme1n1 /datasets ext4 rw,relatime 0 0\n", "/datasets is ext4, expected fuse"),
])
def test_another_mount_or_the_wrong_access_fails(p5, line, expected):
    res = p5.run("--level", "fast", profile=with_s3(p5, line=line))
    assert res.status("storage.mounts") == "fail"
    assert expected in res.check("storage.mounts")["observed"]


def test_a_writable_mount_mounted_read_write_passes(p5):
    res = p5.run("--level", "fast", profile=with_s3(p5, line=MOUNTED_RO.replace("fuse ro,", "fuse rw,"),
                                                    read_only=False))
    assert res.status("storage.mounts") == "pass"


def test_a_daemon_that_died_fails_to_answer(p5):
    dead = ("echo \"stat: cannot read file system information for '$3': Transport endpoint is not connected\" >&2; "
            "exit 1\n")
    res = p5.run("--level", "standard", profile=with_s3(p5, stat=dead))
    assert res.not_passing() == {"storage.s3_answers": "fail"}
    assert "Transport endpoint is not connected" in res.check("storage.s3_answers")["observed"]


def test_a_hung_daemon_is_an_error_not_a_hang(p5):
    res = p5.run("--level", "standard", "--tool-timeout", "1", profile=with_s3(p5, stat="sleep 30\n"))
    assert res.status("storage.s3_answers") == "error"
    assert "timed out" in res.check("storage.s3_answers")["observed"]
