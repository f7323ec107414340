//! onesided: MPI-3 one-sided communication without MPI.
