/* reflector: the root-cluster daemon.  Thin main; see common/daemon.c. */
#include "daemon.h"

int main(int argc, char **argv)
{
	return lm_daemon_main(argc, argv, LM_ROLE_REFLECTOR);
}
