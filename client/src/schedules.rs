//! `/flows/{id}/schedules` and `/schedules/preview`: a flow's schedules and the fire times of a cron expression.

use crate::{ApiFailure, Client};
use hookflow_shared::api::schedules::{
    PatchSchedule, PreviewSchedule, Schedule, ScheduleList, SchedulePreview, WriteSchedule,
};
use std::fmt::Display;

/// The schedules of flows.
#[derive(Debug, Clone, Copy)]
pub struct Schedules<'a>(&'a Client);

impl Client {
    pub fn schedules(&self) -> Schedules<'_> {
        Schedules(self)
    }
}

impl Schedules<'_> {
    pub async fn create(&self, flow_id: impl Display, schedule: &WriteSchedule) -> Result<Schedule, ApiFailure> {
        self.0.post(&format!("/flows/{flow_id}/schedules"), schedule).await
    }

    pub async fn list(&self, flow_id: impl Display) -> Result<ScheduleList, ApiFailure> {
        self.0.get(&format!("/flows/{flow_id}/schedules")).await
    }

    pub async fn get(&self, flow_id: impl Display, id: impl Display) -> Result<Schedule, ApiFailure> {
        self.0.get(&format!("/flows/{flow_id}/schedules/{id}")).await
    }

    pub async fn patch(
        &self,
        flow_id: impl Display,
        id: impl Display,
        patch: &PatchSchedule,
    ) -> Result<Schedule, ApiFailure> {
        self.0.patch(&format!("/flows/{flow_id}/schedules/{id}"), patch).await
    }

    pub async fn delete(&self, flow_id: impl Display, id: impl Display) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/flows/{flow_id}/schedules/{id}")).await
    }

    /// `POST /schedules/preview`.
    pub async fn preview(&self, preview: &PreviewSchedule) -> Result<SchedulePreview, ApiFailure> {
        self.0.post("/schedules/preview", preview).await
    }
}
