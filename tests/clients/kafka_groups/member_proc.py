"""A group member in its own process, so a test can SIGKILL it (no LeaveGroup)."""

import sys

from groups_util import consumer, poll_until

bootstrap, group, topic = sys.argv[1:4]
c = consumer(bootstrap, group)
c.subscribe([topic])
assert poll_until([c], lambda: len(c.assignment()) > 0, 20)
print("assigned", flush=True)
while True:
    c.poll(0.2)
