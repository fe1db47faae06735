"""A deterministic simulation of rollouts (lab only, never installed): the real runner, fleet
lease, deploy API and host-side installer transaction run against simulated hosts on a
simulated clock, every thread switch and fault chosen by one seed (`invoke sim`)."""
