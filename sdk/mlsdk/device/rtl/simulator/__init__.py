"""What runs inside the simulator process: the cocotb server and its bus, the Icarus launcher.

Nothing here is imported by the runtime: a :class:`~mlsdk.device.rtl.cocotb_session.CocotbSession`
starts the simulator, which loads :mod:`.server` as its cocotb test module (by name), and
:mod:`.server` drives the testbench top with the shared
:class:`~mlsdk.device.rtl.driver.Driver` over :class:`.bus.CocotbBus`. In turn, nothing here
imports the runtime's side (sessions, devices), so the simulator starts fast.
"""
