"""Safe broker and controller restarts: availability rules, back ends and the roller."""
