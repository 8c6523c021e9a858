/* The program behind forked.*.out: a parent that works, then forks a child that runs a
 * "PostgresMain" (as a client backend does) and a helper; run under pgbenchlab's callgrind
 * options (server/managed.py CALLGRIND), the child's counts start at fork_process. */
#include <sys/wait.h>
#include <unistd.h>

volatile unsigned long sink;

void __attribute__((noinline)) spin(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i;
}

void __attribute__((noinline)) PostgresMain(void)
{
	spin(1000);
}

pid_t __attribute__((noinline)) fork_process(void)
{
	return fork();
}

int main(void)
{
	pid_t child;

	spin(100000);
	child = fork_process();
	if (child == 0)
	{
		PostgresMain();
		_exit(0);
	}
	waitpid(child, NULL, 0);
	return 0;
}
