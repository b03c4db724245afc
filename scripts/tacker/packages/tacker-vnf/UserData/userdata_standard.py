# Tacker's own StandardUserData (tacker/sol_refactored/infra_drivers/openstack/
# userdata_standard.py, Tacker 16.0.0): one Heat resource per VNFC, each in the zone the grant
# gave it. The instantiate request names this file and the class in additionalParams
# (lcm-operation-user-data, lcm-operation-user-data-class); Tacker runs it with its own Python.
from tacker.sol_refactored.infra_drivers.openstack.userdata_standard import (  # noqa: F401
    StandardUserData,
)
