"""The machinery behind scripts/bench-peers: peers and nagare side by side, alternating."""
