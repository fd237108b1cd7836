/* NCCL hooks (libnccl.so.2): all generated passthrough for now, with
 * outermost-call accounting (ncclBcast, which NCCL implements by calling
 * ncclBroadcast, counts once).  Collective events come in a later issue. */
#include "hooks.h"

#define TS_GEN_LIB_nccl(...) TS_GEN_HOOK(__VA_ARGS__)
#include "hooks_gen.h"
