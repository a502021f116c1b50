/*
 * fake_library.c - a DLL with none of the CUDA driver's or cuBLASLt's entry
 * points, planted under their names by tests/c/cuda_loader/run.sh: loading
 * it must give a clean error, and a copy in the working directory must
 * never be loaded at all.
 */
int fp8q_fake_library(void);

int fp8q_fake_library(void)
{
    return 1;
}
