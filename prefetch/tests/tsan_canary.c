/*
 * tsan_canary.c - a deliberate data race.  `make tsan-test` runs it first
 * and requires ThreadSanitizer to report it, proving that the sanitizer is
 * active and that a clean stress run means something.
 */
#include <pthread.h>
#include <stdio.h>

static long shared_counter;

/* Increment without synchronisation (the race). */
static void *racer(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100000; i++)
		shared_counter++;
	return NULL;
}

int main(void)
{
	pthread_t a, b;
	pthread_create(&a, NULL, racer, NULL);
	pthread_create(&b, NULL, racer, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("counter %ld\n", shared_counter);
	return 0;
}
