/* numa_cuda.h: the driver queries of shim/numa/ (numa_cuda.c); internal. */
#ifndef TRAINSHIM_NUMA_CUDA_H
#define TRAINSHIM_NUMA_CUDA_H
/* The device of the calling thread's current context, -1 when none. */
/* Visible devices (0 when the driver cannot say). */
int ts_numa_cuda_device_count(void);
/* The device's PCI bus id as CUDA writes it ("00000000:3B:00.0"); 0 or -1. */
int ts_numa_cuda_bus_id(int device, char *buf, int len);
#endif
