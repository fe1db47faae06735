"""fleet.terminal: showing text fleet did not write (a host's answer, an inventory, a file of
the checkout) on the operator's terminal. Control side, at its bottom: it imports nothing of
fleet, so fleet.deploy and fleet.release (which fleet.deploy builds artifacts with) both can
use it without a cycle between them.
"""
