#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
