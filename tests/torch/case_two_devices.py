# Tensors on two devices from one thread (EMU_DEVICES=2), every way torch
# makes a device current: device= arguments, torch.cuda.device(), set_device,
# copies across devices, a second thread.  Under the shim, each allocation
# must land on its tensor's device however the device was switched (trainshim
# keeps each thread's current device between switches).  Prints, per step,
# each live tensor's device as torch and as the driver see it, the bytes
# each device's pool counts, and checksums of the data moved: the same
# without the shim (tests/torch/test_torch_two_devices.sh).
import ctypes
import threading

import torch

assert torch.cuda.device_count() == 2, torch.cuda.device_count()
assert torch.cuda.get_allocator_backend() == "cudaMallocAsync", torch.cuda.get_allocator_backend()


class PointerAttributes(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int), ("devicePointer", ctypes.c_void_p),
                ("hostPointer", ctypes.c_void_p), ("reserved", ctypes.c_long * 8)]


rt = ctypes.CDLL("libcudart.so.13")


def driver_device(t):
    a = PointerAttributes()
    rc = rt.cudaPointerGetAttributes(ctypes.byref(a), ctypes.c_void_p(t.data_ptr()))
    return a.device if rc == 0 else f"error {rc}"


live = {}


def show(tag):
    where = " ".join(f"{k}:{t.device.index}/{driver_device(t)}" for k, t in sorted(live.items()))
    print(tag, "|", where, "|", torch.cuda.memory_allocated(0), torch.cuda.memory_allocated(1),
          torch.cuda.max_memory_allocated(0), torch.cuda.max_memory_allocated(1))


def data(n, seed):
    return torch.arange(n, dtype=torch.int64).mul_(seed).remainder_(251).to(torch.uint8)


def checksum(t):
    return int(t.cpu().to(torch.int64).sum())


live["a"] = data(3 << 20, 3).to("cuda:0")
live["b"] = data(5 << 20, 5).to("cuda:1")
show("device arguments")
with torch.cuda.device(1):
    live["c"] = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    live["d"] = data(2 << 20, 7).cuda()
show("torch.cuda.device(1)")
live["e"] = torch.empty(4096, dtype=torch.uint8, device="cuda")
show("after the with block")
torch.cuda.set_device(1)
live["f"] = torch.empty(6 << 20, dtype=torch.uint8, device="cuda")
live["g"] = live["a"].to("cuda:1")
torch.cuda.set_device(0)
live["h"] = live["b"].to("cuda:0")
live["i"] = torch.empty(7 << 20, dtype=torch.uint8, device="cuda")
show("set_device and copies")
print("checksums", checksum(live["a"]), checksum(live["g"]), checksum(live["b"]), checksum(live["h"]),
      checksum(live["d"]))
for k in ("a", "c", "f"):
    del live[k]
show("some freed")
for round_ in range(20):  # back and forth, allocations between every switch
    dev = round_ % 2
    with torch.cuda.device(dev):
        live[f"r{round_}"] = torch.empty((round_ + 1) << 18, dtype=torch.uint8, device="cuda")
    live[f"s{round_}"] = torch.empty(1 << 19, dtype=torch.uint8, device=f"cuda:{1 - dev}")
show("switched 20 times")


def other_thread():
    torch.cuda.set_device(1)
    live["t"] = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")


t = threading.Thread(target=other_thread)
t.start()
t.join()
live["u"] = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
show("another thread on device 1, this one on 0")
live.clear()
torch.cuda.synchronize(0)
torch.cuda.synchronize(1)
show("all freed")
print("ok")
