"""The admin side of share groups with the Java Admin client (kafka-clients 4.3.1):
describeShareGroups, listShareGroupOffsets, alterShareGroupOffsets,
deleteShareGroupOffsets, listGroups(forShareGroups) and deleteShareGroups."""

import uuid

from share_util import (admin, consumed, create_topic, produce, run_worker, set_group_config,
                        start_worker, wait_polling)


def test_describe_list_offsets_alter_delete(nagare):
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"share-admin-{suffix}", f"share-admin-g-{suffix}"
    create_topic(nagare.kafka, topic, 2)
    set_group_config(nagare.kafka, group, share_auto_offset_reset="earliest")
    produce(nagare.kafka, topic, 100, partitions=2)
    member = start_worker(nagare.kafka, group, "consume", topic, 1000,
                          env={"DEADLINE_MS": "12000"})
    try:
        wait_polling(member)
        out = admin(nagare.kafka, group, "describe")
        assert "group Stable members=1" in out, out
        assert f"{topic}-0,{topic}-1" in out, out
        # A group with a member cannot be altered.
        out = admin(nagare.kafka, group, "alter", topic, 0, 10, expect_ok=False)
        assert "error GroupNotEmptyException" in out, out
        m_out, m_err = member.communicate(timeout=60)
    finally:
        if member.poll() is None:
            member.kill()
    assert sorted(int(v) for v in consumed(m_out)[0]) == list(range(100)), m_out + m_err
    out = admin(nagare.kafka, group, "describe")
    assert "group Empty members=0" in out, out
    out = admin(nagare.kafka, group, "offsets")
    assert f"offset {topic}-0 50" in out and f"offset {topic}-1 50" in out, out
    out = admin(nagare.kafka, group, "list")
    assert f"share-group {group} Empty" in out, out

    # Back to offset 10 on partition 0: its records from 10 on come again.
    admin(nagare.kafka, group, "alter", topic, 0, 10)
    out = admin(nagare.kafka, group, "offsets")
    assert f"offset {topic}-0 10" in out, out
    out = run_worker(nagare.kafka, group, "consume", topic, 40, env={"IDLE_EXIT_MS": "2000"})
    assert sorted(int(v) for v in consumed(out)[0]) == list(range(20, 100, 2))

    # Deleting the offsets of the topic starts it afresh (earliest: everything again).
    admin(nagare.kafka, group, "delete-offsets", topic)
    out = admin(nagare.kafka, group, "offsets")
    assert f"offset {topic}-" not in out, out
    out = run_worker(nagare.kafka, group, "consume", topic, 100, env={"IDLE_EXIT_MS": "2000"})
    assert sorted(int(v) for v in consumed(out)[0]) == list(range(100))

    admin(nagare.kafka, group, "delete")
    out = admin(nagare.kafka, group, "list")
    assert f"share-group {group} " not in out, out
    out = admin(nagare.kafka, group, "describe", expect_ok=False)
    assert "error" in out, out


def test_offsets_and_configs_survive_a_restart(nagare):
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"share-admin-r-{suffix}", f"share-admin-rg-{suffix}"
    create_topic(nagare.kafka, topic, 1)
    set_group_config(nagare.kafka, group, share_auto_offset_reset="earliest")
    produce(nagare.kafka, topic, 30)
    run_worker(nagare.kafka, group, "consume", topic, 30)
    nagare.restart()
    out = admin(nagare.kafka, group, "offsets")
    assert f"offset {topic}-0 30" in out, out
    out = admin(nagare.kafka, group, "list")
    assert f"share-group {group} Empty" in out, out
